"""The teaching library on variants it has never seen: the explorer offers the variant named on its
command line (and no other a request names) and reports a failing hook as a bad request; the
pictures show a variant's own field and explain its own action by what it changed."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request

import pytest

from tests.variants.test_variant_commands import BAD_HOOK, HOOK_FAILED, flexible, hwm  # noqa: F401,F811 (a fixture)
from tests.variants.test_variant_models import model_of


def test_the_explorer_serves_the_variant_named_on_its_command_line_and_no_other(flexible, monkeypatch):
    from hwm.teach import explorer

    monkeypatch.setattr(explorer, "OFFERED_VARIANTS", {})
    served = []
    monkeypatch.setattr(explorer, "serve_until_ctrl_c", lambda server, announce: served.append((server, announce)))
    result = hwm("explore", "--protocol", f"{flexible}:FlexibleTooSmall", "--port", "0")
    assert result.exit_code == 0, result.output
    server, announce = served[0]
    assert f"?protocol={flexible}%3AFlexibleTooSmall" in announce
    import threading
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = explorer.url_of(server)
    try:
        listed = json.loads(urllib.request.urlopen(url + "api/presets").read())["presets"]
        assert listed[f"{flexible}:FlexibleTooSmall"]["summary"] == \
            "FlexibleTooSmall (base raft; rules election_quorum, replication_quorum)"

        def post(route, body):
            request = urllib.request.Request(url + route, json.dumps(body).encode(), method="POST")
            try:
                return json.loads(urllib.request.urlopen(request).read())
            except urllib.error.HTTPError as e:
                return json.loads(e.read())

        config = {"servers": 3, "max_generation": 2, "max_crashes": 0}
        found = post("api/search", {"protocol": f"{flexible}:FlexibleTooSmall", "config": config})
        assert found["states"] == 89
        assert {r["property"]: r["length"] for r in found["results"] if r["found"]}["LeaderCommitsAlone"] == 2
        other = post("api/search", {"protocol": f"{flexible}:Flexible", "config": config})
        assert other["error"].startswith(f"protocol: '{flexible}:Flexible' is no preset; the explorer explores a "
                                         f"variant named on its command line")
    finally:
        server.shutdown()
        server.server_close()


def test_a_hook_that_fails_in_the_explorer_is_a_bad_request(tmp_path, monkeypatch):
    from hwm.teach import explorer

    path = tmp_path / "bad.py"
    path.write_text(BAD_HOOK)
    monkeypatch.setattr(explorer, "OFFERED_VARIANTS", {})
    explorer.offer_variant(f"{path}:V")
    config = {"servers": 3, "max_generation": 2, "max_crashes": 0}
    with pytest.raises(explorer.BadRequest, match=HOOK_FAILED.format(path=re.escape(str(path)))):
        explorer.search({"protocol": f"{path}:V", "config": config})


def test_the_pictures_show_the_field_and_explain_the_action_by_what_it_changed():
    from hwm.model.actions import from_step
    from hwm.properties.trace import Step
    from hwm.teach.explain import frames_of
    from hwm.teach.svg import Layout, draw

    model = model_of("PreVote")
    steps = [Step("elect", {"server": "S1", "voters": ("S1", "S2", "S3")}), Step("timeout", {"server": "S2"})]
    states = [model.initial_state()]
    for step in steps:
        states.append(model.apply(states[-1], from_step(step)))
    frames = frames_of(model, steps, states)
    assert frames[2].lines == ["S2 heard True -> False"]
    assert frames[1].lines[-2:] == ["S2 heard False -> True", "S3 heard False -> True"]  # after the raft words
    svg = draw(frames[2], Layout.of(frames), with_lines=True)
    assert svg.count(">heard=False<") == 3 and svg.count(">heard=True<") == 1
    assert "S2 heard True -&gt; False" in svg


def test_the_pictures_draw_a_model_written_from_scratch_on_the_base_model():
    """examples/variants/primary_backup.py: no field, three actions the teaching library has never seen,
    each explained by what it changed, and a primary drawn as a leader although it keeps no match indexes."""
    from hwm.model.actions import from_step
    from hwm.properties.trace import Step
    from hwm.teach.explain import frames_of
    from hwm.teach.svg import Layout, draw
    from tests.variants.test_variant_bare_model import model_of as bare_model_of

    model = bare_model_of("PrimaryBackup")
    steps = [Step("take_over", {"server": "S1"}), Step("write", {"server": "S1", "value": "v1"}),
             Step("copy", {"from": "S1", "to": "S2"}), Step("commit", {"server": "S1"})]
    states = [model.initial_state()]
    for step in steps:
        states.append(model.apply(states[-1], from_step(step)))
    frames = frames_of(model, steps, states)
    assert frames[1].lines == ["S1 role follower -> leader", "S1 generation 0 -> 1"]
    assert frames[3].lines == ["S2 generation 0 -> 1", "S2 log [] -> [1]"]
    assert frames[4].lines == ["S1 hwm 0 -> 1"]
    svg = draw(frames[4], Layout.of(frames), with_lines=True)
    assert "S1 hwm 0 -&gt; 1" in svg and "copy" not in svg.split("S1 hwm")[0][-40:]


def test_the_explorer_serves_a_model_written_from_scratch(monkeypatch):
    """The page lists it by what it adds to the base Model, searches it, and offers its own actions."""
    import threading

    from hwm.teach import explorer
    from tests.variants.test_variant_bare_model import EXAMPLE

    spec = f"{EXAMPLE}:LastEntryFreshness"
    monkeypatch.setattr(explorer, "OFFERED_VARIANTS", {})
    served = []
    monkeypatch.setattr(explorer, "serve_until_ctrl_c", lambda server, announce: served.append(server))
    assert hwm("explore", "--protocol", spec, "--port", "0").exit_code == 0
    server = served[0]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = explorer.url_of(server)

    def post(route, body):
        request = urllib.request.Request(url + route, json.dumps(body).encode(), method="POST")
        return json.loads(urllib.request.urlopen(request).read())

    try:
        listed = json.loads(urllib.request.urlopen(url + "api/presets").read())["presets"]
        assert listed[spec]["summary"] == "LastEntryFreshness (base Model; rules none; actions take_over, copy, commit)"
        config = {"servers": 3, "max_generation": 4, "max_log": 1, "max_crashes": 2}
        found = post("api/search", {"protocol": spec, "config": config})
        assert found["states"] == 8518
        assert {r["property"]: r["length"] for r in found["results"] if r["found"]}["ReadNeverTruncated"] == 14
        path = post("api/state", {"protocol": spec, "config": config, "steps": [{"action": "take_over", "server": "S1"}]})
        offered = [s["label"] for s in path["enabled"]]
        assert "write(S1, v1)" in offered and "copy(S1, S2)" in offered and "commit(S1)" not in offered
        assert not any(label.startswith(("elect", "replicate")) for label in offered), offered
    finally:
        server.shutdown()
        server.server_close()
