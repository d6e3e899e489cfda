"""The command line's text rendering (`hwm.render`): the progress line (its ETA once the levels shrink) and
the step tables that `hwm replay` and a check's counterexamples print."""

import io

from hwm.checker.replay import replay_on_model
from hwm.counterexamples.build import HERE
from hwm.model.state import Config, initial_state
from hwm.properties.trace import load
from hwm.render import Progress
from hwm.teach.text import step_table


def test_progress_line_on_a_terminal_and_silence_elsewhere():
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    stream = Terminal()
    progress = Progress("checking raft", stream)
    progress({"depth": 7, "states": 12345, "frontier": 678, "states_per_second": 9000.4})
    progress.close()
    assert "depth 7  states 12,345  frontier 678  9,000 states/s" in stream.getvalue()
    quiet = io.StringIO()
    Progress("x", quiet)({"depth": 1, "states": 1, "frontier": 1, "states_per_second": 1})
    assert quiet.getvalue() == ""


def test_the_progress_line_gives_an_eta_once_the_levels_shrink():
    progress = Progress("checking raft", stream=io.StringIO(), enabled=True)
    growing = {"depth": 5, "states": 141, "frontier": 200, "states_per_second": 100.0, "elapsed": 1.4,
               "levels": [1, 3, 12, 34, 91]}
    assert "ETA" not in progress.line(growing)
    # raft at log <= 2 after 32 s: 57,700 states expanded (1,803/s), 67,705 found, 15,107 predicted to come
    shrinking = {"depth": 13, "states": 67_705, "frontier": 2_133, "states_per_second": 2_116.0, "elapsed": 32.0,
                 "levels": [1, 3, 12, 34, 91, 253, 735, 2019, 4762, 9330, 14734, 17853, 15745], "expanded": 57_700}
    assert progress.line(shrinking).endswith("  ETA 13 s")  # (67,705 + 15,107 - 57,700) / 1,803 per s


def test_step_table_marks_the_violation():
    state = initial_state(Config())
    text = step_table([("(initial)", state), ("crash(S1)", state)], {1: "Something: broke"})
    assert text.splitlines()[0].split() == ["#", "step", "S1", "S2", "S3", "reads"]
    assert "^ Something: broke" in text


def test_step_tables_show_what_the_bugs_turn_on():
    zab_rows = replay_on_model(load(HERE / "zab-ack-before-persist.json")).rows
    table = step_table(zab_rows)
    assert "prospective" in table and "disk=0" in table  # S3 acknowledged with nothing on disk
    bk_rows = replay_on_model(load(HERE / "bookkeeper-recovery-without-fencing.json")).rows
    table = step_table(bk_rows)
    assert "S4 writer" in table and "S5 recovery" in table and table.count("fenced") >= 2
    assert "S3 fenced" not in table and "F1 [1] h0  " in table.splitlines()[-1]
