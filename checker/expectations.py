"""What the catalogue expects of each preset at given bounds, and whether a run showed it.

A broken preset's violations show only from some bounds on (a lost read needs a crash, Raft's
Figure 8 a third generation): a run below them proves nothing about the bug, and the judgement
must say so rather than count the preset's ✓ as "behaves as expected". `NEEDS` holds, for every
broken preset and every always property it violates, the smallest bounds at which the
breadth-first search shows the violation (derived by bench/needs.py, checked by
tests/checker/test_expectations.py against the pinned lengths and the grid below them).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from hwm.checker.report import Report
from hwm.checker.verdict import DEFAULT_CONFIG, missed_witnesses, tour_config, tour_protocol
from hwm.model.state import Config
from hwm.properties.protocol import PRESETS

# The bounds a needs-entry names, in Config's (and the command line's) order. An entry of three
# bounds needs no partition (max_partitions any); a preset whose bug needs one names four.
BOUNDS = ("max_generation", "max_log", "max_crashes", "max_partitions")

# (preset, servers) -> property -> the minimal (max_generation, max_log, max_crashes[, max_partitions])
# alternatives at which the search on the rpc network shows its violation. A property absent from a known
# entry is not violated up to the tour's bounds for that preset (an empty entry: the preset holds
# there, as raft-seed-quorum does with an odd number of servers, where its quorum is a majority).
NEEDS: dict[tuple[str, int], dict[str, tuple[tuple[int, ...], ...]]] = {
    ('seed', 3): {
        'ReadNeverTruncated': ((2, 1, 0),),
        'HwmNeverTruncated': ((2, 1, 0),),
        'HwmWithinLog': ((2, 1, 0),),
        'ReadsAgree': ((2, 1, 0),),
        'CommittedOnQuorum': ((2, 1, 0),),
        'ReadNeverLost': ((2, 1, 0),),
    },
    ('kip101', 3): {
        'ReadNeverTruncated': ((1, 1, 1),),
        'HwmNeverTruncated': ((2, 1, 1),),
        'ReadsAgree': ((2, 1, 1),),
        'CommittedOnQuorum': ((1, 1, 1),),
        'ReadNeverLost': ((2, 1, 1),),
    },
    ('raft-seed-quorum', 3): {},  # three servers: the [N/2]-th index is a majority's
    ('raft-seed-quorum', 4): {
        'CommittedOnQuorum': ((1, 1, 0),),
    },
    ('raft-any-generation-commit', 3): {
        'ReadNeverTruncated': ((4, 1, 0),),
        'HwmNeverTruncated': ((4, 1, 0),),
        'ReadsAgree': ((4, 1, 0),),
        'CommittedOnQuorum': ((4, 1, 0),),
        'ReadNeverLost': ((4, 1, 0),),
    },
    ('raft-any-election', 3): {
        'ReadNeverTruncated': ((2, 1, 0),),
        'HwmNeverTruncated': ((2, 1, 0),),
        'ReadsAgree': ((2, 1, 0),),
        'CommittedOnQuorum': ((2, 1, 0),),
        'ReadNeverLost': ((2, 1, 0),),
    },
    ('raft-generation-mismatch', 3): {
        'ReadNeverTruncated': ((3, 1, 0),),
        'HwmNeverTruncated': ((3, 1, 0),),
        'ReadsAgree': ((2, 1, 0),),
        'CommittedOnQuorum': ((2, 1, 0),),
        'ReadNeverLost': ((3, 1, 0),),
    },
    ('raft-truncate-to-leader-hwm', 3): {
        'ReadsAgree': ((3, 1, 1),),
        'ReadNeverTruncated': ((2, 1, 1),),
        'ReadNeverLost': ((3, 1, 1),),
    },
    ('raft-truncate-to-own-hwm', 3): {
        'ReadNeverTruncated': ((1, 1, 1),),
        'HwmNeverTruncated': ((2, 1, 1),),
        'ReadsAgree': ((2, 1, 1),),
        'CommittedOnQuorum': ((1, 1, 1),),
        'ReadNeverLost': ((2, 1, 1),),
    },
    ('zab-ack-before-persist', 3): {
        'AckedWriteNeverLost': ((2, 1, 1),),
        'ReadNeverTruncated': ((2, 1, 1),),
        'HwmNeverTruncated': ((1, 1, 1),),
        'HwmWithinLog': ((3, 1, 1),),
        'ReadsAgree': ((3, 1, 1),),
        'CommittedOnQuorum': ((2, 1, 1),),
        'ReadNeverLost': ((3, 1, 1),),
    },
    ('bookkeeper-recovery-without-fencing', 3): {
        'AckedWriteNeverLost': ((1, 1, 0),),
        'ReadNeverTruncated': ((1, 1, 0),),
        'HwmNeverTruncated': ((1, 1, 0),),
        'CommittedOnQuorum': ((1, 1, 0),),
        'ReadNeverLost': ((1, 1, 0),),
    },
    ('bookkeeper-unblocked-adds', 3): {  # the ensemble change needs a crashed bookie
        'AckedWriteNeverLost': ((1, 1, 1),),
        'HwmNeverTruncated': ((1, 1, 1),),
        'CommittedOnQuorum': ((1, 1, 1),),
        'ReadNeverLost': ((1, 1, 1),),
        'ReadNeverTruncated': ((1, 1, 1),),
    },
    ('kafka-truncate-to-hwm', 3): {
        'AckedWriteNeverLost': ((1, 1, 1), (3, 1, 0)),
        'ReadNeverTruncated': ((1, 1, 1), (3, 1, 0)),
        'HwmNeverTruncated': ((2, 1, 1), (3, 1, 0)),
        'ReadsAgree': ((2, 1, 1), (3, 1, 0)),
        'AcknowledgedWriteKept': ((2, 1, 1), (3, 1, 0)),
        'CommittedOnQuorum': ((1, 1, 1), (3, 1, 0)),
        'ReadNeverLost': ((2, 1, 1), (3, 1, 0)),
    },
    ('kafka-kip101', 3): {
        'AckedWriteNeverLost': ((3, 1, 0),),
        'ReadNeverTruncated': ((3, 1, 1),),
        'HwmNeverTruncated': ((3, 1, 1),),
        'ReadsAgree': ((3, 1, 0),),
        'CommittedOnQuorum': ((3, 1, 0),),
    },
    ('kafka-kip279', 3): {
        'ReadsAgree': ((3, 1, 0),),
        'AckedWriteNeverLost': ((3, 1, 0),),
        'CommittedOnQuorum': ((3, 1, 0),),
    },
    ('kafka-unclean-election', 3): {
        'AckedWriteNeverLost': ((3, 1, 1),),
        'ReadNeverTruncated': ((3, 1, 1),),
        'HwmNeverTruncated': ((3, 1, 1),),
        'ReadsAgree': ((3, 1, 1),),
        'AcknowledgedWriteKept': ((3, 1, 1),),
        'CommittedOnQuorum': ((3, 1, 1),),
        'ReadNeverLost': ((3, 1, 1),),
    },
    ('kafka-kip320-first-try', 3): {
        'AckedWriteNeverLost': ((3, 1, 0),),
        'ReadNeverTruncated': ((3, 1, 0),),
        'HwmNeverTruncated': ((3, 1, 0),),
        'ReadsAgree': ((3, 1, 0),),
        'CommittedOnQuorum': ((3, 1, 0),),
    },
    ('kafka-min-insync-1', 3): {
        'ReadNeverTruncated': ((3, 1, 0),),
        'AckedWriteNeverLost': ((1, 1, 0),),
        'CommittedOnQuorum': ((1, 1, 0),),
    },
    ('raft-lease-reads-without-check-quorum', 3): {
        'LeaseReadNeverStale': ((2, 2, 0, 1),),
    },
    ('kafka-without-controller-fencing', 3): {  # a partition, then a second epoch elected around the cut-off leader
        'ReadNeverTruncated': ((2, 1, 0, 1),),
        'HwmNeverTruncated': ((2, 1, 0, 1),),
        'ReadNeverLost': ((2, 1, 0, 1),),
        'ReadsAgree': ((2, 1, 0, 1),),
        'CommittedOnQuorum': ((2, 1, 0, 1),),
        'AcknowledgedWriteKept': ((2, 1, 0, 1),),
        'AckedWriteNeverLost': ((2, 1, 0, 1),),
    },
    ('kafka-unflushed', 3): {  # one power failure, of S1 or S2, once both hold an acknowledged entry
        'ReadNeverTruncated': ((1, 1, 1),),
        'HwmNeverTruncated': ((1, 1, 1),),
        'AckedWriteNeverLost': ((1, 1, 1),),
        'CommittedOnQuorum': ((1, 1, 1),),
    },
}


@dataclass(frozen=True)
class Judgement:
    """The tour's judgement against the catalogue: mismatches (exit 1), expectations the bounds
    were too small to show (exit 3 when nothing mismatched), and what was seen."""
    problems: list[str] = field(default_factory=list)
    not_shown: list[str] = field(default_factory=list)
    seen: int = 0  # expected violations shown
    expected: int = 0  # expected violations in all (seen + not shown)

    @property
    def all_seen(self) -> bool:
        return not self.problems and not self.not_shown


def _describe(bounds: tuple[int, ...]) -> str:
    minimum = (1, 0, 0, 0)  # below these nothing runs: not worth naming
    named = [f"{k}>={v}" for k, v, low in zip(BOUNDS, bounds, minimum) if v > low]
    return ", ".join(named) or "any bounds"


def needs_text(preset: str, prop: str, config: Config | None = None) -> str:
    """The bounds `prop`'s violation by `preset` needs, in the command line's words; servers and
    network are named when `config` has others."""
    entries = [(at, table[prop]) for (name, at), table in NEEDS.items() if name == preset and prop in table]
    if not entries:
        return "bounds the catalogue does not know"
    at, alternatives = next(((a, t) for a, t in entries if config is not None and a == config.servers), entries[0])
    where = []
    if config is None or config.servers != at:
        where.append(f"servers={at}")
    if config is None or config.network != "rpc":
        where.append("network=rpc")
    return ", ".join(where + [" or ".join(_describe(b) for b in alternatives)])


def expected_properties(preset: str) -> dict[str, str]:
    """Every always property the catalogue knows `preset` to violate, with the bounds it needs."""
    out = {}
    for (name, at), table in NEEDS.items():
        if name == preset:
            for prop in table:
                out.setdefault(prop, needs_text(preset, prop))
    return out


def shows(preset: str, prop: str, config: Config) -> bool | None:
    """True when `config` is at or above bounds at which `preset` is known to violate `prop`;
    False when the catalogue knows these servers and network and the bounds are below every such
    point; None when it has no knowledge of them (other servers, the async network)."""
    table = NEEDS.get((preset, config.servers))
    if table is None or config.network != "rpc":
        return None
    have = tuple(getattr(config, k) for k in BOUNDS)
    return any(all(h >= n for h, n in zip(have, need)) for need in table.get(prop, ()))


def within_table(preset: str, config: Config) -> bool:
    """Whether `config` lies within the grid NEEDS was derived on (so a violation absent from the
    table at these bounds is a mismatch, not a property the larger bounds add)."""
    if (preset, config.servers) not in NEEDS or config.network != "rpc":
        return False
    top = tour_config(preset, replace(DEFAULT_CONFIG, servers=config.servers))
    return all(getattr(config, k) <= getattr(top, k) for k in BOUNDS)


def judge(results: list[tuple[str, Report]]) -> Judgement:
    """Compare each preset's report with what the catalogue expects at the bounds it was checked at; a
    variant in the tour is expected to hold, as a safe preset."""
    problems, not_shown = [], []
    seen = expected = 0
    for name, r in results:
        protocol, _, broken = tour_protocol(name)
        config = Config.from_mapping(r.config)
        missed = missed_witnesses(r, protocol, config)
        if missed:
            problems.append(f"{r.protocol_name}: sometimes witnesses unreached: {', '.join(missed)}")
        got = frozenset(r.violated)
        if not broken:
            if got:
                problems.append(f"{r.protocol_name}: unexpectedly violates {', '.join(sorted(got))} "
                                + ("(the catalogue calls it safe)" if name in PRESETS else
                                   "(a variant in the tour is expected to hold)"))
            continue
        known = expected_properties(name)
        must = {p for p in known if shows(name, p, config)}
        missing = sorted(must - got)
        if missing:
            problems.append(f"{name}: expected to violate {', '.join(missing)} but did not")
        extra = sorted(got - set(known)) if within_table(name, config) else []
        table = NEEDS.get((name, config.servers), {})
        extra += sorted(p for p in got & set(known) if p not in table and within_table(name, config))
        if extra:
            problems.append(f"{name}: unexpectedly violates {', '.join(extra)}")
        seen += len(got & set(known))
        # A property the table knows not to show at these servers (raft-seed-quorum at an odd
        # count) is not expected here; at servers or a network the table does not know, all are.
        here = known if (name, config.servers) not in NEEDS or config.network != "rpc" else table
        unshown = sorted(p for p in here if p not in got and p not in must)
        expected += len(got & set(known)) + len(unshown)
        if unshown:
            by_needs: dict[str, list[str]] = {}
            for p in unshown:
                by_needs.setdefault(needs_text(name, p, config), []).append(p)
            not_shown.append(f"{name}: not shown at these bounds: " + "; ".join(
                f"{', '.join(props)} (needs {needs})" for needs, props in by_needs.items()))
    return Judgement(problems, not_shown, seen, expected)


def tour_verdicts(preset: str, report: Report) -> dict[str, str]:
    """The tour's verdict on each always property of `preset`'s report, judged against the catalogue
    as `judge` judges the preset (its exit status): "expected" (a violation the
    catalogue expects, seen), "unexpected" (a violation it does not expect: a mismatch), "missing" (an
    expected violation these bounds show, not found: a mismatch), "not shown" (an expected violation
    these bounds are too small for), "beyond" (a broken preset's violation above the bounds the
    catalogue was derived at: not judged), "holds"."""
    always = [p for p, r in report.results.items() if r.kind == "always"]
    got = set(report.violated)
    if not tour_protocol(preset)[2]:
        return {p: "unexpected" if p in got else "holds" for p in always}
    config = Config.from_mapping(report.config)
    known = expected_properties(preset)
    table = NEEDS.get((preset, config.servers), {})
    within = within_table(preset, config)
    # As judge: a property the table knows not to show at these servers is not expected here.
    here = known if (preset, config.servers) not in NEEDS or config.network != "rpc" else table
    out = {}
    for p in always:
        if p in got:
            if within and (p not in known or p not in table):
                out[p] = "unexpected"
            else:
                out[p] = "expected" if p in known else "beyond"
        elif p in known and shows(preset, p, config):
            out[p] = "missing"
        elif p in here:
            out[p] = "not shown"
        else:
            out[p] = "holds"
    return out


# The bounds a preset's tour values may set (TOUR_BOUNDS, PRESET_TOUR_BOUNDS) and the rest of the
# configuration; a caller that knows which of them the user gave passes those as `chosen`.
