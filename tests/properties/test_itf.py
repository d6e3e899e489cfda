"""ITF (the TLA+ tools' Informal Trace Format): hwm writes it and reads it back, round trip."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from hwm.checker.itf_trace import itf_of_trace, trace_of_itf
from hwm.cli import main
from hwm.properties import itf
from hwm.properties.protocol import resolve
from hwm.properties.trace import load

# The raft family's entries, but for the partitioned ones: ITF here has no cut (model/partition.py).
RAFT_FAMILY = sorted(p for p in Path("counterexamples").glob("*.json")
                     if resolve(load(p).protocol)[1].system == "raft" and "max_partitions" not in load(p).config)


def hwm(*args):
    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    return result.exit_code, result.output


def as_read_back(doc):
    return itf.parse(json.loads(itf.dumps(doc)))


@pytest.mark.parametrize("path", RAFT_FAMILY, ids=lambda p: p.stem)
def test_every_raft_family_counterexample_survives_the_round_trip(path):
    trace = load(path)
    doc = itf_of_trace(trace)
    assert doc["vars"] == list(itf.VARIABLES) and len(doc["states"]) == len(trace.steps) + 1
    back = trace_of_itf(as_read_back(doc))
    assert [s.to_json() for s in back.steps] == [s.to_json() for s in trace.steps]
    assert (back.protocol, back.config, back.property, back.expect) == (
        trace.protocol, trace.config, trace.property, trace.expect)


def test_a_trace_from_another_tool_gives_its_steps_from_the_states_alone():
    # What TLC or Apalache write: no #meta.hwm, no step names, functions as records.
    trace = load("counterexamples/raft-any-generation-commit.json")
    doc = itf_of_trace(trace)
    del doc["#meta"]["hwm"]
    for state in doc["states"]:
        state["#meta"] = {"index": state["#meta"]["index"]}
        state["generation"] = {k: v for k, v in state["generation"]["#map"]}
    read = as_read_back(doc)
    with pytest.raises(ValueError, match="names no protocol"):
        trace_of_itf(read)
    back = trace_of_itf(read, "raft-any-generation-commit")
    assert [(s.action, dict(s.args, value=None)) for s in back.steps] == [
        (s.action, dict(s.args, value=None)) for s in trace.steps]


def test_check_saves_itf_beside_each_counterexample_and_replay_reads_it(tmp_path):
    code, out = hwm("check", "--protocol", "raft-truncate-to-own-hwm", "--max-generation", "2", "--save", tmp_path, "--itf")
    assert code == 1
    written = sorted(tmp_path.glob("*.itf.json"))
    assert written and len(written) == len(list(tmp_path.glob("*.json"))) - len(written)
    for path in written:
        code, out = hwm("replay", path, "-q")
        assert code == 0 and "(as expected)" in out, out
    code, out = hwm("replay", "counterexamples/seed.json", "-q", "--itf", tmp_path / "seed.itf.json")
    assert code == 0 and (tmp_path / "seed.itf.json").exists()
    assert hwm("replay", tmp_path / "seed.itf.json", "-q")[0] == 0


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["states"][1].pop("log"), "state 1, variable 'log': hwm reads ITF traces of its own variables"),
    (lambda d: d["states"][2]["role"]["#map"][0].__setitem__(1, "boss"), "state 2, variable 'role'"),
    (lambda d: d["states"].__setitem__(2, d["states"][4]), "state 2: no step of the model leads from state 1"),
    (lambda d: d["states"][0].__setitem__("crashes", "x"),
     "state 0, variable 'crashes': expected an integer"),
])
def test_bad_itf_exits_2_naming_the_state_and_variable(tmp_path, edit, message):
    doc = itf_of_trace(load("counterexamples/seed.json"))
    edit(doc)
    path = tmp_path / "bad.itf.json"
    path.write_text(json.dumps(doc))
    code, out = hwm("replay", path, "-q")
    assert code == 2 and message in out, out


# The other systems' entries, but for the partitioned ones: their models' further variables follow the eight.
OTHER_SYSTEMS = sorted(p for p in Path("counterexamples").glob("*.json")
                       if resolve(load(p).protocol)[1].system != "raft" and "max_partitions" not in load(p).config)
FURTHER = {"zab": ["synced", "durable", "epochs", "acked"],
           "kafka": ["in_isr", "leader", "truncating", "isr", "flushed", "acked"],
           "bookkeeper": ["fenced", "responded", "negatives", "acked", "ensembles", "stored"]}


@pytest.mark.parametrize("path", OTHER_SYSTEMS, ids=lambda p: p.stem)
def test_every_other_systems_counterexample_survives_the_round_trip(path):
    trace = load(path)
    doc = itf_of_trace(trace)
    assert doc["vars"] == list(itf.VARIABLES) + FURTHER[resolve(trace.protocol)[1].system]
    assert all(set(state) == {"#meta", *doc["vars"]} for state in doc["states"])
    back = trace_of_itf(as_read_back(doc))
    assert [s.to_json() for s in back.steps] == [s.to_json() for s in trace.steps]


def test_a_state_whose_further_variable_is_not_the_models_leads_nowhere(tmp_path):
    doc = itf_of_trace(load("counterexamples/kafka-kip101.json"))
    doc["states"][3]["in_isr"]["#map"][0][1] = not doc["states"][3]["in_isr"]["#map"][0][1]
    path = tmp_path / "k.itf.json"
    path.write_text(json.dumps(doc))
    code, out = hwm("replay", path, "-q")
    assert code == 2 and out.strip() == f"error: {path}, state 3: no step of the model leads from state 2 to this one"
    del doc["states"][0]["in_isr"]
    path.write_text(json.dumps(doc))
    code, out = hwm("replay", path, "-q")
    assert code == 2 and out.strip() == (f"error: {path}, state 0, variable 'in_isr': the model of kafka-kip101 has a "
                                         f"variable 'in_isr', which this state has not")


def test_replay_writes_another_systems_trace_as_itf_and_reads_it_back(tmp_path):
    code, out = hwm("replay", "counterexamples/kafka-kip101.json", "-q", "--itf", tmp_path / "k.itf.json")
    assert code == 0 and f"wrote {tmp_path / 'k.itf.json'}" in out, out
    code, again = hwm("replay", tmp_path / "k.itf.json", "-q")
    assert code == 0 and again.replace(str(tmp_path / "k.itf.json"), "F") == out.splitlines()[0].replace(
        "counterexamples/kafka-kip101.json", "F") + "\n", again
