"""z3 proofs the explorer cannot give: the entry point of `hwm prove`.

Three parts, each a list of `Proof` obligations with a verdict, the seconds it
took and a detail line:

- `quorum` (`proofs_quorum`): the quorum arithmetic for every N up to `max_n`;
- `induction` (`proofs_induction`): an inductive invariant for the rpc model
  with unbounded generations and crashes, at fixed N and log length L; a CTI is
  put to the breadth-first explorer;
- `bmc` (`proofs_bmc`): the transition relation unrolled from the initial
  state, shortest violations, compared with the explorer's.

What counts as success depends on the protocol: a safe one must prove (and show
no violation); a preset the catalogue knows to be broken at these bounds must
show its counterexample (a reachable CTI, a BMC trace). A protocol that is not
a preset (a preset with flags changed) is expected to be safe.
"""

from __future__ import annotations

from dataclasses import dataclass

from hwm.checker.run import CheckRequest
from hwm.checker.run import run as explore  # this module's `run` runs a plan
from hwm.model.registry import build_model
from hwm.proofs.bmc import bmc_proof
from hwm.proofs.encodings import partitioned
from hwm.proofs.partition import induction_proof as partitioned_raft_induction
from hwm.proofs.bookkeeper import induction_proof as bookkeeper_induction_proof
from hwm.proofs.induction import RAFT_INVARIANT, induction_proofs
from hwm.proofs.kafka_induction import induction_proof as kafka_induction_proof
from hwm.proofs.zab_induction import induction_proof as zab_induction_proof
from hwm.proofs.progress import Ledger, ledger_or_new
from hwm.proofs.quorum import quorum_proofs
from hwm.proofs.symbolic import ALWAYS_CHECKED, LEASE_CHECKED, Proof
from hwm.model.state import Config
from hwm.properties.protocol import PRESET_TOUR_BOUNDS, PRESETS, TOUR_BOUNDS, Protocol, preset_of

__all__ = ["Proof", "PARTS", "DEFAULT_BMC_PROPERTIES", "Plan", "expected_broken", "run", "render",
           "violations_found", "RAFT_INVARIANT", "ALWAYS_CHECKED"]

PARTS = ("quorum", "induction", "bmc")
# The headline property, and the one a wrong quorum rule breaks first.
DEFAULT_BMC_PROPERTIES = ("ReadNeverTruncated", "CommittedOnQuorum")
DEFAULT_INDUCTION_LOG = 2
DEFAULT_BMC_DEPTH = 10


@dataclass
class Plan:
    """What `run` proves, with every bound spelled out."""

    protocol_name: str
    protocol: Protocol
    parts: tuple[str, ...] = PARTS
    servers: int = 3
    max_log: int | None = None  # None: 2 for induction, the tour's (below) for BMC
    max_n: int = 15
    depth: int = DEFAULT_BMC_DEPTH
    # BMC only (induction's generations, crashes and partitions are unbounded). None: the tour's bound for
    # the preset (PRESET_TOUR_BOUNDS: the partition presets' partition and second entry), else for its
    # system (TOUR_BOUNDS: Kafka's generation 3), else Config's.
    max_generation: int | None = None
    max_crashes: int | None = None
    max_partitions: int | None = None
    properties: tuple[str, ...] | None = None  # BMC; None: `default_properties`
    compare_with_explorer: bool = True

    @property
    def induction_log(self) -> int:
        return self.max_log if self.max_log is not None else DEFAULT_INDUCTION_LOG

    def _tour(self, bound: str, chosen: int | None, default: int) -> int:
        if chosen is not None:
            return chosen
        tour = {**TOUR_BOUNDS.get(self.protocol.system, {}), **PRESET_TOUR_BOUNDS.get(preset_of(self.protocol), {})}
        return tour.get(bound, default)

    @property
    def bmc_config(self) -> Config:
        return Config(servers=self.servers,
                      max_generation=self._tour("max_generation", self.max_generation, Config.max_generation),
                      max_log=self._tour("max_log", self.max_log, Config.max_log),
                      max_crashes=self._tour("max_crashes", self.max_crashes, Config.max_crashes),
                      max_partitions=self._tour("max_partitions", self.max_partitions, 0))

    @property
    def bmc_properties(self) -> tuple[str, ...]:
        return self.properties or default_properties(self.protocol)


def default_properties(protocol: Protocol) -> tuple[str, ...]:
    """BMC's properties when none is asked for: the headline ones, and a lease preset's own."""
    return DEFAULT_BMC_PROPERTIES + (LEASE_CHECKED if protocol.lease_reads else ())


# Each encoded system's inductive invariant, over proofs/symbolic.py's encoding (raft) or the ones that extend
# it (proofs/zab.py, proofs/kafka.py, proofs/bookkeeper.py); every system has every part.
INDUCTION = {"raft": induction_proofs, "zab": zab_induction_proof, "kafka": kafka_induction_proof,
             "bookkeeper": bookkeeper_induction_proof}
ENCODED_SYSTEMS = tuple(INDUCTION)


def unencoded(protocol: Protocol) -> str | None:
    """Why the z3 encodings (proofs/symbolic.py, the raft model; proofs/zab.py, proofs/kafka.py,
    proofs/bookkeeper.py) cannot stand for `protocol`, or None."""
    if protocol.system not in ENCODED_SYSTEMS:
        return (f"the z3 encodings are the {', '.join(ENCODED_SYSTEMS)} models'; this protocol follows the "
                f"{protocol.system} rules")
    variant = getattr(type(protocol), "variant", None)  # a variant's own Python (docs/variants.md)
    if variant is not None:
        from hwm.properties.rules import overridden
        hooks = overridden(variant)
        return (f"{variant.__name__} is a variant, and the z3 encoding has the flags' rules only, not "
                + (f"its {', '.join(hooks)}" if hooks else "a variant's own properties, fields or actions"))
    return None


def expected_broken(protocol: Protocol, servers: int) -> bool:
    """Whether the catalogue expects this protocol to break at `servers` servers.

    A broken preset is expected to break from its `caught_at` servers on (raft-seed-quorum
    differs from raft only at even N); anything that is not a preset is expected to be safe.
    """
    name = preset_of(protocol)
    if name is None or not PRESETS[name].broken:
        return False
    if name == "raft-seed-quorum":
        # Its only difference from raft is seed-index, which equals majority exactly for odd N
        # (the quorum proof); at N=2 it already counts an entry on one server of two.
        return servers % 2 == 0
    return PRESETS[name].caught_at.get("servers", servers) <= servers


def run(plan: Plan, ledger: Ledger | None = None) -> list[Proof]:
    """The plan's proofs, in order; each is also added to `ledger.proofs` as it is finished, so a run
    that is stopped still has those (and every obligation decided, `ledger.obligations`)."""
    ledger = ledger_or_new(ledger)
    first = len(ledger.proofs)
    broken = expected_broken(plan.protocol, plan.servers)
    name = plan.protocol_name
    if "quorum" in plan.parts:
        ledger.proofs += quorum_proofs(plan.max_n, ledger)
    if "induction" in plan.parts:
        prove = INDUCTION[plan.protocol.system]
        if plan.protocol.system == "raft" and partitioned(plan.protocol) is not None:
            prove = partitioned_raft_induction  # check-quorum and leases: on a network that partitions
        ledger.proofs.append(prove(name, plan.protocol, broken=broken, servers=plan.servers,
                                   max_log=plan.induction_log, ledger=ledger))
    if "bmc" in plan.parts:
        config = plan.bmc_config
        lengths = None
        if plan.compare_with_explorer:
            with ledger.obligation("bmc", f"bmc {name}: the explorer's shortest violations ({config.describe()})",
                                   record=False):
                report = explore(CheckRequest(name), model=build_model(plan.protocol, config))
            lengths = {p: report.results[p].length for p in plan.bmc_properties}
        ledger.proofs.append(bmc_proof(name, plan.protocol, config, broken=broken, max_depth=plan.depth,
                                       properties=plan.bmc_properties, explorer_lengths=lengths, ledger=ledger))
    return ledger.proofs[first:]


def violations_found(proofs: list[Proof]) -> list[str]:
    """The proofs that show the protocol violating a property: a BMC trace, a reachable CTI."""
    found = []
    for p in proofs:
        if p.part == "bmc" and any(r["length"] is not None for r in p.data.get("results", {}).values()):
            found.append(p.name)
        elif p.part == "induction" and p.data.get("reachable"):
            found.append(p.name)
    return found


def render(proofs: list[Proof]) -> str:
    """One line per proof: ✓/✗ (? undecided), seconds, name and detail (a CTI or trace follows, indented)."""
    lines = []
    for p in proofs:
        head, *rest = p.detail.splitlines() or [""]
        lines.append(f"{'?' if p.undecided else '✓' if p.ok else '✗'} {p.seconds:7.2f}s  {p.name}: {head}")
        lines += ["      " + line for line in rest]
    return "\n".join(lines)
