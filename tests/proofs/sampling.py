"""What the z3 encodings' tests share: reachable states to compare guards and effects on, and the
explorer's pinned shortest lengths to compare bounded model checking with."""

from __future__ import annotations

import random

from hwm.checker.engine import Sampler
from hwm.checker.run import CheckRequest, run
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.proofs.bmc import bmc
from hwm.proofs.induction import ConjunctEvaluator
from hwm.proofs.symbolic import action_name, checked_properties
from hwm.properties.protocol import PRESETS
from tests.pinned import PINNED


def sample_states(protocol, config: Config, count: int, limit: int = 3000, seed: int = 0) -> list:
    """`count` states spread over the first `limit` reachable ones (breadth-first, no symmetry)."""
    sampler = Sampler(limit)
    run(CheckRequest("model", symmetry=False, max_states=limit, properties=()), model=build_model(protocol, config),
        visitors=[sampler])
    return random.Random(seed).sample(sampler.states, min(count, len(sampler.states)))


def pinned_lengths(name: str, config: Config) -> dict[str, int]:
    """The explorer's shortest violation lengths pinned for preset `name` at `config` (tests/pinned.py)."""
    key = (name, config.servers, config.max_generation, config.max_log, config.max_crashes, config.network, True)
    return PINNED[key]["lengths"]


def bmc_disagreements(name: str, config: Config, depth: int, properties: tuple[str, ...] | None = None) -> dict:
    """{property: (BMC's length, the pinned length)} wherever they differ within `depth` steps (a pinned
    length beyond `depth` must be None in BMC); every BMC trace is replayed on the model by `bmc`."""
    protocol = PRESETS[name].protocol
    properties = properties or checked_properties(protocol)
    pinned = pinned_lengths(name, config)
    found = bmc(protocol, config, properties, max_depth=depth)
    out = {}
    for prop, result in found.items():
        theirs = pinned.get(prop)
        expected = theirs if theirs is not None and theirs <= depth else None
        if result.length != expected:
            out[prop] = (result.length, theirs)
    return out


def what_fails(result) -> set[str]:
    """What an induction check without some conjunct names as failing: "IndNext <action>" (a step of that
    action breaks the rest), or a property the rest no longer implies ("<property>", or "<property> on
    <action>" for a step property)."""
    out = {"IndNext " + action_name(c.action).split("(")[0] for c in result.ctis}
    for failed in result.safety_failed:
        prop, _, action = failed.partition(" on ")
        out.add(f"{prop} on {action.split('(')[0]}" if action else prop)
    return out


def failing_conjuncts(enc, conjuncts, nodes) -> dict:
    """{conjunct name: a node where it fails} over explicit states (with the ghost `enc` reads)."""
    evaluator = ConjunctEvaluator(enc, conjuncts)
    return {name: node for node in nodes for name in evaluator.failed(node)}
