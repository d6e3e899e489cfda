"""The events a run of the model itself would record: for tests, benches and coverage baselines.

Each model step becomes one event per server it changed (its new generation, role, log
edits and HWM), in server order, with the acting server's event first (in a round trip, the
follower's: a recorder logs a change before the messages that announce it); a read logs the
entries the client was given, a crash and a restart log themselves.
"""

from __future__ import annotations

from typing import Iterable, Iterator

from hwm.checker.validate import ROUND_TRIPS
from hwm.properties.events import LOGGABLE, Event, Header, log_edit


def step_events(names: tuple[str, ...], action, before, after, logged=frozenset(LOGGABLE)) -> list[Event]:
    """The events of one model step from state `before` to `after`."""
    name = action[0]
    acting = action[1] if len(action) > 1 and isinstance(action[1], int) else None
    order = list(range(len(names)))
    if acting is not None:
        order.remove(acting)
        order.insert(0, acting)
    if name in ROUND_TRIPS:
        # The follower logs its change before its reply reaches the leader (a recorder logs a change
        # before the messages that announce it): the leader's consequence comes second.
        order.remove(action[2])
        order.insert(0, action[2])
    events = []
    for k in order:
        old, new = before.servers[k], after.servers[k]
        if name == "crash" and k == acting:
            events.append(Event(names[k], crash=True))
            continue
        fields: dict = {}
        if name == "restart" and k == acting:
            fields["restart"] = True
            if "hwm" in logged:
                fields["hwm"] = new.hwm  # what the restarted server recovered
        if "generation" in logged and new.generation != old.generation:
            fields["generation"] = new.generation
        if "role" in logged and new.role != old.role and new.alive:
            fields["role"] = new.role
        if "log" in logged and new.log != old.log:
            fields.update(log_edit(old.log, new.log))
        if "hwm" in logged and new.hwm != old.hwm and new.alive:
            fields["hwm"] = new.hwm
        if name == "read" and k == acting and "reads" in logged:
            read = tuple(sorted(after.reads - before.reads))
            fields["read"] = read or ((min(new.hwm, len(new.log)), new.log[min(new.hwm, len(new.log)) - 1]),)
        if fields:
            events.append(Event(names[k], **fields))
    return events


def run_events(model, actions: Iterable, names: tuple[str, ...] | None = None,
               logged=frozenset(LOGGABLE)) -> tuple[Header, list[Event]]:
    """The recorded run of `actions` from the model's initial state (each must be enabled)."""
    names = names or tuple(f"S{k + 1}" for k in range(model.n))
    header = Header(names, frozenset(logged), None, model.config.network)
    state = model.initial_state()
    events: list[Event] = []
    for action in actions:
        reason = model.why_not(state, action)
        if reason is not None:
            raise ValueError(f"{action} is not enabled: {reason}")
        after = model.apply(state, action)
        events += step_events(names, action, state, after, logged)
        state = after
    return header, events


def random_actions(model, steps: int, seed: int) -> Iterator:
    """A random walk of the model (reads, crashes and restarts included)."""
    import random
    rng = random.Random(seed)
    state = model.initial_state()
    for _ in range(steps):
        options = list(model.actions(state))
        if not options:
            return
        action = rng.choice(options)
        yield action
        state = model.apply(state, action)
