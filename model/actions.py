"""The actions of the model and what every protocol flag does to them.

An action is a tuple: ("elect", candidate, voters), ("write", leader),
("replicate", leader, follower), ("send"|"deliver"|"drop", from, to),
("read", server), ("crash", server), ("restart", server), with servers as
positions 0..n-1. Each action has a guard, which returns None when the action is
enabled or the reason it is not, and an effect, which returns the next state.
A reason that is a `BoundHit` means only a bound of the configuration stopped
the action: the explorer reports those so a bounded check is not taken for a proof.
"""

from __future__ import annotations

from typing import Iterator

from hwm.model.state import LEADER
from hwm.properties.rules import up_to_date  # noqa: F401 - the vote rule, where the model reads it
from hwm.properties.snapshot import server_name
from hwm.properties.trace import Step

Action = tuple


class BoundHit(str):
    """A guard's reason when the action is cut by a bound, not forbidden by the protocol."""

    def __new__(cls, bound: str, text: str):
        self = super().__new__(cls, text)
        self.bound = bound
        return self


def last_generation(log: tuple[int, ...]) -> int:
    return log[-1] if log else 0


def leader_refusal(servers, l: int) -> str | None:
    """Why server `l` cannot act as a leader at all, or None."""
    leader = servers[l]
    if not leader.alive:
        return f"{server_name(l)} is down"
    if leader.role != LEADER:
        return f"{server_name(l)} is not a leader"
    return None


def pair_refusal(servers, l: int, f: int, itself: str) -> str | None:
    """Why leader `l` cannot reach follower `f` at all (`itself` when they are the same server),
    or None: the liveness checks every leader-to-follower action starts with."""
    if l == f:
        return itself
    refusal = leader_refusal(servers, l)
    if refusal is None and not servers[f].alive:
        return f"{server_name(f)} is down"
    return refusal


class Model:
    """The base of every system's model (`model.raft`, `model.zab`, `model.kafka`,
    `model.bookkeeper`), and what engines take: what a server and its clients do the same way in every model: a client reads below the
    high-water mark, a server crashes and restarts; and the dispatch from an action to its
    guard and effect. A model's state is a NamedTuple with `servers` (each with alive, role,
    log, hwm), `reads` and `crashes`; `_effects` maps an action's name to its effect."""

    # How a server with nothing readable says so, in its system's words.
    NOTHING_TO_READ = "has nothing at or below its high-water mark"
    # The actions the liveness check takes as weakly fair (checker/liveness.py, docs/liveness.md,
    # "Fairness"): an instance that stays enabled is eventually taken. Raft's: a leader keeps
    # replicating to each follower (its HWM advance is part of the round trip), and a crashed server
    # comes back. Each system's model names its own.
    FAIR: tuple[str, ...] = ("replicate", "restart")
    # Raft's async network splits the round trip into `send`, `deliver` and `drop` per channel. A leader
    # keeps sending appends to each follower (`send` takes `replicate`'s place in FAIR there, weakly fair:
    # without it a leader may stop sending to one follower for ever), and channels are fair-lossy:
    # `deliver` is strongly fair, a channel that holds a message infinitely often delivers infinitely
    # often (it is disabled whenever the channel is empty, so weak fairness would owe nothing to a
    # channel whose every copy is dropped). `drop` is not fair.
    ASYNC_FAIR: tuple[str, ...] = ("send", "restart")
    STRONG_FAIR: tuple[str, ...] = ("deliver",)
    # A variant's read rule (`Rules.readable`, the raft system's models set it), else None: the
    # flags' rule, any live server up to its high-water mark, inlined.
    read_hook = None

    def readable(self, k: int, server) -> int:
        """Up to which index live server `k` serves a client's read."""
        if self.read_hook is None:
            return min(server.hwm, len(server.log))
        return self.read_hook(k, server.role == LEADER, server.log, server.hwm)

    def successors(self, s, bounds_hit: set | None = None) -> Iterator[tuple[Action, object]]:
        """Every enabled action and its next state, in the order of `actions`."""
        apply = self.apply
        for action in self.actions(s, bounds_hit):
            yield action, apply(s, action)

    def why_not(self, s, action: Action) -> str | None:
        """None when `action` is enabled in `s`, else the reason."""
        guard = getattr(self, "guard_" + action[0], None)
        if guard is None:
            return f"{action[0]} is not an action of the {self.protocol.system} model"
        return guard(s, *action[1:])

    def apply(self, s, action: Action):
        return self._effects[action[0]](s, *action[1:])

    def server_actions(self, s, alive: list, leading: list, hit: set) -> Iterator[Action]:
        """Each server's restart, or its write (a leader), read and crash, in server order."""
        config, reads, hook = self.config, s.reads, self.read_hook
        for k, server in enumerate(s.servers):
            if not alive[k]:
                yield ("restart", k)
                continue
            log = server.log
            if leading[k]:
                if len(log) < config.max_log:
                    yield ("write", k)
                else:
                    hit.add("max_log")
            readable = min(server.hwm, len(log)) if hook is None else hook(k, leading[k], log, server.hwm)
            if readable and not all((i + 1, log[i]) in reads for i in range(readable)):
                yield ("read", k)
            if s.crashes < config.max_crashes:
                yield ("crash", k)
            else:
                hit.add("max_crashes")

    def guard_read(self, s, r: int) -> str | None:
        server = s.servers[r]
        if not server.alive:
            return f"{server_name(r)} is down"
        readable = self.readable(r, server)
        if readable == 0:
            return f"{server_name(r)} {self.NOTHING_TO_READ}"
        if all((i + 1, server.log[i]) in s.reads for i in range(readable)):
            return f"clients have already read everything {server_name(r)} can serve"
        return None

    def effect_read(self, s, r: int):
        # "Any client can read the log entries only till the high-water mark."
        server = s.servers[r]
        readable = self.readable(r, server)
        return s._replace(reads=s.reads | {(i + 1, server.log[i]) for i in range(readable)})

    def guard_write(self, s, l: int) -> str | None:
        refusal = leader_refusal(s.servers, l)
        if refusal is None and len(s.servers[l].log) >= self.config.max_log:
            return BoundHit("max_log", f"{server_name(l)}'s log is at max_log {self.config.max_log}")
        return refusal

    def guard_crash(self, s, c: int) -> str | None:
        if not s.servers[c].alive:
            return f"{server_name(c)} is already down"
        if s.crashes >= self.config.max_crashes:
            return BoundHit("max_crashes", f"max_crashes {self.config.max_crashes} reached")
        return None

    def guard_restart(self, s, r: int) -> str | None:
        if s.servers[r].alive:
            return f"{server_name(r)} is not down"
        return None


# ------------------------------------------------------- actions <-> trace steps
def to_step(action: Action, value: str | None = None) -> Step:
    """A model action as a trace step with servers named S1..Sn."""
    name = action[0]
    if name == "elect":
        return Step(name, {"server": server_name(action[1]), "voters": tuple(server_name(v) for v in action[2])})
    if name == "write":
        return Step(name, {"server": server_name(action[1]), "value": value or f"v{action[1] + 1}"})
    if name in ("replicate", "shrink_isr"):
        return Step(name, {"leader": server_name(action[1]), "follower": server_name(action[2])})
    if name in ("send", "deliver", "drop"):
        return Step(name, {"from": server_name(action[1]), "to": server_name(action[2])})
    if name == "sync":
        return Step(name, {"leader": server_name(action[1]), "follower": server_name(action[2])})
    if name == "leader_and_isr":
        return Step(name, {"leader": server_name(action[1]), "replica": server_name(action[2])})
    if name == "add":
        return Step(name, {"value": value} if value else {})
    if name == "heal":
        return Step(name, {})
    if name in ("send_add", "fence", "recovery_read", "change_ensemble"):
        return Step(name, {"bookie": server_name(action[1])})
    if len(action) == 3:  # a variant's action over two servers (model.variant_model): `from` and `to`
        return Step(name, {"from": server_name(action[1]), "to": server_name(action[2])})
    return Step(name, {"server": server_name(action[1])})


def from_step(step: Step) -> Action:
    """A trace step (already validated against the configuration) as a model action."""
    def pos(name: str) -> int:
        return int(name[1:]) - 1

    a = step.args
    if step.action == "elect":
        return ("elect", pos(a["server"]), tuple(sorted(pos(v) for v in a["voters"])))
    if step.action in ("replicate", "sync", "shrink_isr"):
        return (step.action, pos(a["leader"]), pos(a["follower"]))
    if step.action == "leader_and_isr":
        return ("leader_and_isr", pos(a["leader"]), pos(a["replica"]))
    if step.action in ("add", "heal"):
        return (step.action,)
    if step.action in ("send_add", "fence", "recovery_read", "change_ensemble"):
        return (step.action, pos(a["bookie"]))
    if step.action in ("send", "deliver", "drop") or "from" in a:  # a variant's two-server action too
        return (step.action, pos(a["from"]), pos(a["to"]))
    return (step.action, pos(a["server"]))
