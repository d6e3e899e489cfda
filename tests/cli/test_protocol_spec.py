"""Every command's `--protocol` reads the same spec (a preset, or a preset with flags changed) in one
place (hwm/params.py's ProtocolParam): what `hwm check` accepts, `hwm cluster`, `hwm node` and the rest
accept too, and mean the same protocol by it."""

from __future__ import annotations

import click
import pytest

from hwm.cli import main
from hwm.params import ProtocolParam, spec_text
from hwm.properties.protocol import Protocol, resolve

SPECS = ["raft", "raft,noop_on_election=true", "raft, commit = any-generation"]


def _protocol_options() -> dict[str, click.Option]:
    ctx = click.Context(main)
    out = {}
    for name in main.list_commands(ctx):
        command = main.get_command(ctx, name)
        for param in command.params:
            if isinstance(param, click.Option) and "--protocol" in param.opts:
                out[name] = param
    return out


def test_every_protocol_option_is_a_protocol_param():
    options = _protocol_options()
    assert {"check", "graph", "replay", "explore", "cluster", "node", "controller", "validate", "prove",
            "test"} <= set(options)
    for name, option in options.items():
        assert isinstance(option.type, ProtocolParam), name


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("command", ["check", "graph", "cluster", "node", "prove", "validate", "replay"])
def test_a_spec_means_one_protocol_in_every_command(command, spec):
    option = _protocol_options()[command]
    ctx = click.Context(main.get_command(click.Context(main), command))
    value = option.process_value(ctx, spec)
    protocol = value if isinstance(value, Protocol) else resolve(value)[1]
    assert protocol == resolve(ProtocolParam().convert(spec, None, None))[1]


def test_hwm_cluster_passes_the_spec_on_as_text_every_node_reads_back():
    for spec in SPECS:
        parsed = ProtocolParam().convert(spec, None, None)
        assert ProtocolParam().convert(spec_text(parsed), None, None) == parsed
    assert spec_text(ProtocolParam().convert("raft,noop_on_election=true", None, None)) == "raft,noop_on_election=true"


@pytest.mark.parametrize("command", ["cluster", "node", "controller"])
def test_the_running_clusters_commands_refuse_a_model_only_protocol_exit_2(command):
    option = _protocol_options()[command]
    ctx = click.Context(main.get_command(click.Context(main), command))
    with pytest.raises(click.BadParameter, match="model-only"):
        option.process_value(ctx, "raft-lease-reads")  # the model's lease reads: no TCP replica has them
