"""The verdict rules: what the bounds make possible, when a check passes, and what the catalogue
expects of each preset. One home for them, read by the command line, the catalogue builder, the
benchmarks and the tests alike."""

from __future__ import annotations

from dataclasses import replace

from hwm.checker.report import Report
from hwm.model.state import Config
from hwm.properties.quorum import majority
from hwm.properties.protocol import PRESET_TOUR_BOUNDS, PRESETS, TOUR_BOUNDS, Protocol

DEFAULT_CONFIG = Config()


def _competing_leader(protocol: Protocol, config: Config) -> str | None:
    """Why no leader can be elected without another leader's uncommitted entries, or None.

    That needs a second generation and, under Raft's election rule on the rpc network, a third
    server or a third generation: with two servers every quorum is both, and an uncommitted entry
    of the current generation is on the leader alone (a whole round trip would have committed
    it), so the leader refuses its vote to the other; only an older generation's entry, which a
    leader of generation 2 or more replicates without committing, is on both.
    """
    if config.max_generation < 2:
        return "max_generation >= 2"
    if config.servers < 2:
        return "servers >= 2"
    if ((protocol.lease_reads or protocol.check_quorum) and protocol.system == "raft" and config.max_crashes < 1
            and config.max_partitions < 1):
        # Every server hears from the live leader: none times out, or none votes (model/partition.py).
        return "max_crashes >= 1 or max_partitions >= 1 (under lease_reads or check_quorum a leader is replaced only once it is down or cut off)"
    if (config.servers < 3 and config.max_generation < 3 and protocol.election == "longest-log"
            and config.network == "rpc"):
        return "servers >= 3 or max_generation >= 3 (or election=any, or the async network)"
    return None


def witness_needs(name: str, protocol: Protocol, config: Config) -> str | None:
    """What a `sometimes` witness needs that these bounds rule out, or None when it is possible.

    Conservative: a witness is called impossible only when no run within the bounds can reach
    it; an unreached witness that is possible still fails the check.
    """
    if name == "LeaderStepsDown":
        # ZAB's check_quorum (model/zab_partition.py): a leader is cut off, or enough servers crash that
        # the leader and the live rest are fewer than a quorum.
        if config.servers < 2:
            return "servers >= 2"
        crashes = config.servers - majority(config.servers) + 1
        if config.max_partitions < 1 and config.max_crashes < crashes:
            return f"max_partitions >= 1 or max_crashes >= {crashes}"
        return None
    if config.max_log < 1 and name != "CrashAndRejoin":
        return "max_log >= 1"
    if name == "CrashAndRejoin":
        return "max_crashes >= 1" if config.max_crashes < 1 else None
    if name == "EntryRead":
        return None
    if name == "LeaseHolderPartitioned":
        if config.servers < 2:
            return "servers >= 2"
        return "max_partitions >= 1" if config.max_partitions < 1 else None
    if name == "LeaderChangeWithUncommitted":
        if protocol.check_quorum and protocol.system == "raft" and config.servers >= 2:
            # A voter that hears from a live leader refuses, and a leader cut off steps down: no older
            # leader is left when a new one is elected (model/partition.py).
            return "check_quorum=false (with check-quorum an older leader has crashed or stepped down first)"
        if protocol.lease_reads and config.max_partitions < 1:
            # A server campaigns only when it hears from no live leader: the older one is down, a follower.
            return "max_partitions >= 1 (under lease_reads a server campaigns only once no live leader reaches it)"
        if _two_servers_of_a_preset(protocol, config):
            if protocol.system == "raft" and protocol.quorum == "seed-index" and protocol.commit == "any-generation":
                # The seed's quorum on two servers is one: a leader commits each entry as it writes it,
                # and all it holds once elected (model/raft.py), so no leader holds an uncommitted one.
                return "servers >= 3 (the seed's quorum on two servers is the leader alone, which commits as it writes)"
            if _holders_refuse(protocol) and (protocol.noop_on_election or protocol.system == "zab"):
                # A new leader first writes (raft's no-op) or syncs (ZAB's NEWLEADER) in its own generation,
                # and on two servers the round trip that puts that on the other server commits it and every
                # entry before it; an entry the other lacks makes its holder refuse its vote.
                return ("servers >= 3 (on two servers a leader's own first entry commits all before it, and the "
                        "holder of an entry the other lacks refuses it its vote)")
        return _competing_leader(protocol, config)
    if name == "UncommittedTruncated":
        # A conflicting entry from a competing leader, or a restart rule that truncates.
        if protocol.restart != "keep" and config.max_crashes >= 1:
            return None
        competing = _competing_leader(protocol, config)
        if competing is None and _two_servers_of_a_preset(protocol, config) and _holders_refuse(protocol):
            # Every election needs both votes, and the holder of an entry the other lacks refuses its vote:
            # no leader ever holds an entry that conflicts with one its follower holds.
            competing = "servers >= 3 (on two servers the holder of an entry the other lacks refuses it its vote)"
        if competing is None:
            return None
        return competing + (" or a truncating restart rule with max_crashes >= 1" if protocol.restart == "keep"
                            else " or max_crashes >= 1")
    return None


def _two_servers_of_a_preset(protocol: Protocol, config: Config) -> bool:
    """Two servers on the rpc network under a preset's own rules (a variant's hooks may change the votes
    and the commits these arguments rest on)."""
    return type(protocol) is Protocol and config.servers == 2 and config.network == "rpc"


def _holders_refuse(protocol: Protocol) -> bool:
    """Whether a voter refuses a candidate whose log lacks an entry it holds, and keeps what it holds
    through a crash: raft's or ZAB's longest-log election over logs a restart keeps (ZAB's follower that
    acknowledges before it persists loses entries in a crash)."""
    return (protocol.system in ("raft", "zab") and protocol.election == "longest-log" and protocol.restart == "keep"
            and not protocol.zab_ack_before_persist)


def impossible_witnesses(report: Report, protocol: Protocol, config: Config) -> dict[str, str]:
    """Unreached witnesses the bounds rule out, with what each needs."""
    out = {}
    for name in report.unreached:
        needs = witness_needs(name, protocol, config)
        if needs is not None:
            out[name] = needs
    return out


def missed_witnesses(report: Report, protocol: Protocol, config: Config) -> list[str]:
    """Unreached witnesses that the bounds allow: the check may be vacuous, and it fails."""
    impossible = impossible_witnesses(report, protocol, config)
    return [name for name in report.unreached if name not in impossible]


def passed(report: Report, protocol: Protocol, config: Config) -> bool:
    """Every always property holds and every witness the bounds allow is reached."""
    return not report.violated and not missed_witnesses(report, protocol, config)


def thin(protocol: Protocol, config: Config) -> str | None:
    """Why a check at these bounds never writes a client entry, or None.

    Client entries are what the properties protect; a check without any is no evidence
    about them, whatever its verdicts. A new leader's no-op takes a log slot first.
    """
    needed = 2 if protocol.noop_on_election else 1
    if config.max_log < needed:
        why = " (the new leader's no-op takes the first slot)" if protocol.noop_on_election else ""
        return f"no client entry is ever written: needs max_log >= {needed}{why}"
    return None


def tour_protocol(name: str) -> tuple[Protocol, str, bool]:
    """A tour row's protocol, the preset whose tour values its bounds take, and whether the catalogue
    calls it broken: a preset's own, or for a variant in the tour (docs/variants.md) its base preset's,
    and safe (nothing tells the catalogue a user's variant is meant to break)."""
    if name in PRESETS:
        return PRESETS[name].protocol, name, PRESETS[name].broken
    from hwm.properties.protocol import resolve
    protocol = resolve(name)[1]
    from hwm.model.variant import base_preset
    base = base_preset(type(protocol).variant)
    return protocol, base["preset"] if isinstance(base, dict) else base, False


CHOSEN_ALL = frozenset({"servers", "max_generation", "max_log", "max_crashes", "network", "channel_capacity",
                        "max_partitions"})


def tour_config(preset: str, config: Config, chosen: frozenset[str] | set[str] | None = None) -> Config:
    """The bounds the tour checks `preset` at. Every bound the user did not choose takes the tour's
    value for the preset: its system's TOUR_BOUNDS lower it, its own PRESET_TOUR_BOUNDS set it (the
    partition presets' partition and second entry); a bound the user chose is theirs. `chosen`: the
    bounds given on the command line; None (a caller with a Config alone): none at the default bounds,
    all of them at any other. A preset whose no-op fills the log gets one slot more, so that its
    client entries get the room every other preset's get. A variant in the tour takes its base preset's."""
    protocol, preset, _ = tour_protocol(preset)
    if chosen is None:
        chosen = frozenset() if config == DEFAULT_CONFIG else CHOSEN_ALL
    lowered = TOUR_BOUNDS.get(protocol.system, {})
    config = replace(config, **{k: min(v, getattr(config, k)) for k, v in lowered.items() if k not in chosen})
    config = replace(config, **{k: v for k, v in PRESET_TOUR_BOUNDS.get(preset, {}).items() if k not in chosen})
    if protocol.noop_on_election and config.max_log >= 1 and thin(protocol, config):
        return replace(config, max_log=config.max_log + 1)
    return config
