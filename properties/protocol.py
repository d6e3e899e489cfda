"""Protocol variants: the flags (docs/design.md) and the named presets.

This is the one place the flags are defined. The model and the implementation
both read a `Protocol` and must give each flag the same meaning.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Mapping

# Each flag and the values it may take, in the order `hwm protocols` prints them.
FLAG_VALUES: dict[str, tuple[Any, ...]] = {
    # computeHighwaterMark: seed sorts ascending and takes [N/2]; majority takes the
    # largest index held by floor(N/2)+1 servers.
    "quorum": ("seed-index", "majority"),
    # Advance the HWM whenever the quorum index grows (seed) or only when the entry
    # there carries the leader's own generation (Raft section 5.4.2).
    "commit": ("any-generation", "current-generation"),
    # Any live server with a quorum of voters, or only one whose log is at least as
    # up to date (last generation, then length) as every voter's.
    "election": ("any", "longest-log"),
    # Seed follower: truncate from the first entry whose generation differs, append
    # what is missing, answer with the last log index. Raft: check the entry before
    # the batch, answer with prev + len(entries).
    "append_check": ("generation-mismatch", "previous-entry"),
    # On restart: keep the log; truncate to the leader's HWM (seed text); truncate to
    # the server's own checkpointed HWM (Kafka before KIP-101).
    "restart": ("keep", "truncate-to-leader-hwm", "truncate-to-own-hwm"),
    # Whether a server's HWM survives a crash.
    "hwm_durable": (False, True),
    # A new leader appends an entry of its own generation (Raft/ZAB practice).
    "noop_on_election": (False, True),
}

FLAG_MEANINGS: dict[str, str] = {
    "quorum": "how the leader turns match indexes into the quorum index",
    "commit": "when the leader may advance its high-water mark",
    "election": "which servers may win an election",
    "append_check": "how a follower checks and applies an append",
    "restart": "what a server does to its log when it restarts",
    "hwm_durable": "whether the high-water mark survives a crash",
    "noop_on_election": "whether a new leader appends an entry of its own generation",
}


class ProtocolError(ValueError):
    """A protocol name or flag that is not part of the vocabulary."""


@dataclass(frozen=True)
class Protocol:
    """One point in the space of protocol variants. Defaults are the safe `raft`."""

    quorum: str = "majority"
    commit: str = "current-generation"
    election: str = "longest-log"
    append_check: str = "previous-entry"
    restart: str = "keep"
    hwm_durable: bool = False
    noop_on_election: bool = False

    def __post_init__(self) -> None:
        for flag in fields(self):
            value = getattr(self, flag.name)
            allowed = FLAG_VALUES[flag.name]
            if value not in allowed or type(value) is not type(allowed[0]):
                raise ProtocolError(
                    f"flag {flag.name!r} cannot be {value!r}; expected one of "
                    + ", ".join(_show(v) for v in allowed)
                )

    def flags(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def differences(self, other: "Protocol") -> dict[str, Any]:
        """The flags where `self` differs from `other`, with self's values."""
        return {k: v for k, v in self.flags().items() if other.flags()[k] != v}


def _show(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


@dataclass(frozen=True)
class Preset:
    name: str
    protocol: Protocol
    summary: str
    reference: str
    # True when the catalogue expects the checker to find a violation of some
    # `always` property for this preset (at the bounds given in `caught_at`).
    broken: bool
    # The smallest bounds (CLI names) at which the checker catches it; {} for safe presets.
    caught_at: Mapping[str, Any]
    # The `always` properties it violates at the default bounds (the tour checks this).
    breaks: frozenset = frozenset()


RAFT = Protocol()

SEED = Protocol(
    quorum="seed-index",
    commit="any-generation",
    election="any",
    append_check="generation-mismatch",
    restart="truncate-to-leader-hwm",
    hwm_durable=False,
    noop_on_election=False,
)

_DEFAULT_CATCH = {"servers": 3}

PRESETS: dict[str, Preset] = {
    p.name: p
    for p in [
        Preset(
            "seed",
            SEED,
            "the pattern exactly as the seeds write it",
            "Fowler, High-Water Mark: computeHighwaterMark takes serverLogIndexes.get(noOfServers / 2); "
            "'if (logIndexAtQuorum > currentHighWaterMark)'; maybeTruncate removes entries whose "
            "generation differs; a rejoining server 'asks for the current high-water mark, truncates "
            "its log to high-water mark'",
            True,
            _DEFAULT_CATCH,
            frozenset({"ReadNeverTruncated", "HwmNeverTruncated", "ReadNeverLost", "ReadsAgree", "HwmWithinLog", "CommittedOnQuorum"}),
        ),
        Preset(
            "raft",
            RAFT,
            "Raft: majority quorum, commit only current-generation entries, up-to-date voting, "
            "previous-entry check, durable log",
            "Ongaro & Ousterhout, In Search of an Understandable Consensus Algorithm, sections 5.3-5.4",
            False,
            {},
        ),
        Preset(
            "kip101",
            replace(RAFT, restart="truncate-to-own-hwm", hwm_durable=True),
            "Kafka before KIP-101: a restarting follower truncates its log to its own checkpointed "
            "high-water mark, which lags the leader's",
            "KIP-101: Alter Replication Protocol to use Leader Epoch rather than High Watermark for "
            "Truncation (scenario 1, 'high watermark truncation followed by immediate leader election')",
            True,
            _DEFAULT_CATCH,
            frozenset({"ReadNeverTruncated", "HwmNeverTruncated", "ReadNeverLost", "ReadsAgree", "CommittedOnQuorum"}),
        ),
        Preset(
            "raft-seed-quorum",
            replace(RAFT, quorum="seed-index"),
            "raft with the seed's computeHighwaterMark: the [N/2]-th smallest match index, "
            "one server short of a majority when N is even",
            "Fowler, High-Water Mark: 'return serverLogIndexes.get(noOfServers / 2)'",
            True,
            {"servers": 4},
        ),
        Preset(
            "raft-any-generation-commit",
            replace(RAFT, commit="any-generation"),
            "raft that advances the HWM over an entry of an older generation (Raft Figure 8)",
            "Raft paper section 5.4.2 and Figure 8: 'Raft never commits log entries from previous "
            "terms by counting replicas'",
            True,
            _DEFAULT_CATCH,
            frozenset({"ReadNeverTruncated", "HwmNeverTruncated", "ReadNeverLost", "ReadsAgree", "CommittedOnQuorum"}),
        ),
        Preset(
            "raft-any-election",
            replace(RAFT, election="any"),
            "raft where a server with a stale log can win an election",
            "Raft paper section 5.4.1, election restriction: 'the voter denies its vote if its own "
            "log is more up-to-date than that of the candidate'",
            True,
            _DEFAULT_CATCH,
            frozenset({"ReadNeverTruncated", "HwmNeverTruncated", "ReadNeverLost", "ReadsAgree", "CommittedOnQuorum"}),
        ),
        Preset(
            "raft-generation-mismatch",
            replace(RAFT, append_check="generation-mismatch"),
            "raft with the seed's follower: no check of the previous entry, and the reply carries "
            "the follower's last log index",
            "Fowler, High-Water Mark: appendEntries returns wal.getLastLogIndex(); Raft paper Figure 2, "
            "AppendEntries receiver rule 2 (prevLogIndex/prevLogTerm)",
            True,
            _DEFAULT_CATCH,
            frozenset({"ReadNeverTruncated", "HwmNeverTruncated", "ReadNeverLost", "ReadsAgree", "CommittedOnQuorum"}),
        ),
        Preset(
            "raft-truncate-to-leader-hwm",
            replace(RAFT, restart="truncate-to-leader-hwm"),
            "raft where a restarting server truncates its log to the leader's HWM, as the seed says",
            "Fowler, High-Water Mark: 'It then explicitly asks for the current high-water mark, "
            "truncates its log to high-water mark'",
            True,
            _DEFAULT_CATCH,
            frozenset({"ReadNeverTruncated", "ReadNeverLost", "ReadsAgree"}),
        ),
        Preset(
            "raft-truncate-to-own-hwm",
            replace(RAFT, restart="truncate-to-own-hwm"),
            "raft where a restarting server truncates its log to its own (volatile, so zero) HWM",
            "KIP-101 (Kafka): truncation to the high watermark on restart loses committed data",
            True,
            _DEFAULT_CATCH,
            frozenset({"ReadNeverTruncated", "HwmNeverTruncated", "ReadNeverLost", "ReadsAgree", "CommittedOnQuorum"}),
        ),
        Preset(
            "raft-durable-hwm",
            replace(RAFT, hwm_durable=True),
            "raft with a checkpointed HWM; safe: the HWM only ever covers committed entries",
            "Kafka's replication-offset-checkpoint; Raft keeps commitIndex volatile (Figure 2)",
            False,
            {},
        ),
        Preset(
            "raft-noop",
            replace(RAFT, noop_on_election=True),
            "raft whose new leader appends an entry of its own generation; safe, and commits sooner",
            "Raft paper section 8 ('a blank no-op entry at the start of its term'); ZAB's "
            "synchronisation phase",
            False,
            {},
        ),
    ]
}

# The single-flag mutants of raft, for teaching and for the suite's bug catalogue.
MUTANTS: tuple[str, ...] = tuple(
    name for name, p in PRESETS.items() if len(p.protocol.differences(RAFT)) == 1
)


def parse_flag_value(flag: str, text: Any) -> Any:
    """Turn a flag value from JSON or the command line into its Python value."""
    if flag not in FLAG_VALUES:
        raise ProtocolError(f"unknown flag {flag!r}; flags are " + ", ".join(FLAG_VALUES))
    allowed = FLAG_VALUES[flag]
    if isinstance(allowed[0], bool):
        if isinstance(text, bool):
            return text
        lowered = str(text).lower()
        if lowered in ("true", "yes", "1", "on"):
            return True
        if lowered in ("false", "no", "0", "off"):
            return False
        raise ProtocolError(f"flag {flag!r} takes true or false, not {text!r}")
    if text not in allowed:
        raise ProtocolError(
            f"flag {flag!r} cannot be {text!r}; expected one of " + ", ".join(map(_show, allowed))
        )
    return text


def resolve(spec: Any) -> tuple[str, Protocol]:
    """A protocol from a preset name or `{"preset": NAME, "flags": {...}}`.

    Returns a display name and the protocol. The display name is the preset's
    name, or `NAME+flag=value,...` for a modified preset.
    """
    if isinstance(spec, str):
        if spec not in PRESETS:
            raise ProtocolError(f"unknown protocol {spec!r}; presets are " + ", ".join(PRESETS))
        return spec, PRESETS[spec].protocol
    if isinstance(spec, Mapping):
        unknown = set(spec) - {"preset", "flags"}
        if unknown:
            raise ProtocolError(f"protocol object has unknown keys {sorted(unknown)}")
        base_name = spec.get("preset", "raft")
        _, base = resolve(base_name)
        flags = spec.get("flags", {})
        if not isinstance(flags, Mapping):
            raise ProtocolError("protocol 'flags' must be an object of flag: value")
        changes = {k: parse_flag_value(k, v) for k, v in flags.items()}
        protocol = replace(base, **changes)
        if not changes:
            return base_name, protocol
        shown = ",".join(f"{k}={_show(v)}" for k, v in sorted(changes.items()))
        return f"{base_name}+{shown}", protocol
    raise ProtocolError(f"a protocol is a preset name or an object, not {type(spec).__name__}")


def preset_of(protocol: Protocol) -> str | None:
    """The preset whose flags are exactly `protocol`'s, if any."""
    for name, preset in PRESETS.items():
        if preset.protocol == protocol:
            return name
    return None
