"""A variant in another process (model/variant_source.py, model/variant.py's `reloaded`): its protocol, model
and own properties pickle by spec, load again where the user's file is not (from the copy `shipment` makes,
as Spark's executors do), and a file that changed in between is one line naming it."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

from hwm.checker.run import CheckRequest, run
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.model.variant_source import shipment
from hwm.properties.protocol import resolve

FLEXIBLE = Path(__file__).resolve().parents[2] / "examples" / "variants" / "flexible.py"
CONFIG = Config(servers=3, max_generation=2, max_crashes=0)

# Unpickles the model (argv[1]) and its properties in a process that never loaded the variant, and
# prints what a search of it finds.
ELSEWHERE = """
import pickle, sys
from hwm.checker.run import CheckRequest, run
model, properties = pickle.load(open(sys.argv[1], "rb"))
model.properties = properties
report = run(CheckRequest("elsewhere"), model=model)
print(report.states, report.transitions, sorted(n for n, r in report.results.items() if r.found))
"""


def elsewhere(pickled: Path, path: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", f"import sys; sys.path[:0] = {path!r}\n" + ELSEWHERE,
                           str(pickled)], capture_output=True, text=True, cwd="/")


def test_a_variant_pickles_by_spec_and_loads_from_the_shipped_copy(tmp_path):
    variant = tmp_path / "user" / "flexible.py"
    variant.parent.mkdir()
    variant.write_text(FLEXIBLE.read_text())
    name, protocol = resolve(f"{variant}:FlexibleTooSmall")
    model = build_model(protocol, CONFIG)
    pickled = tmp_path / "model.pickle"
    pickled.write_bytes(pickle.dumps((model, model.properties)))
    assert len(pickled.read_bytes()) < 4000  # the spec and the flags, not the variant's code
    report = run(CheckRequest(name), model=model)
    expected = f"{report.states} {report.transitions} {sorted(n for n, r in report.results.items() if r.found)}"
    assert expected.startswith("89 379 ") and "LeaderCommitsAlone" in expected

    assert elsewhere(pickled, []).stdout.strip() == expected  # the file where it was
    shipped = shipment(protocol)
    variant.rename(tmp_path / "moved.py")  # an executor on another machine: no such file
    gone = elsewhere(pickled, [])
    assert gone.returncode != 0 and f"{variant}: no such file" in gone.stderr
    assert elsewhere(pickled, [str(shipped.parent)]).stdout.strip() == expected

    (tmp_path / "moved.py").rename(variant)
    variant.write_text(variant.read_text() + "\n# edited\n")
    changed = elsewhere(pickled, [])
    assert changed.returncode != 0
    assert f"{variant}: the variant's file here differs from the one loaded where the search started" \
        in changed.stderr


def test_the_shipped_copy_is_removed_when_the_process_ends(tmp_path):
    # Spark serves the copy to its executors for as long as the search's process runs; none outlives it.
    made = subprocess.run([sys.executable, "-c", "from hwm.model.variant_source import shipment\n"
                           "from hwm.model.variant import resolve\n"
                           f"path = shipment(resolve({f'{FLEXIBLE}:FlexibleTooSmall'!r})[1])\n"
                           "assert path.exists()\nprint(path)"],
                          capture_output=True, text=True, env={**os.environ, "TMPDIR": str(tmp_path)})
    assert made.returncode == 0, made.stderr
    assert Path(made.stdout.strip()).parent.parent == tmp_path
    assert not list(tmp_path.iterdir())
