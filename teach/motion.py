"""What a picture adds to a frame's state: the messages of its step, the quorum behind a new
high-water mark, and the step where two protocols on one path part.

Computed from consecutive frames (the state before a step is the previous frame's), the step
as written in the trace and each system's own row (`hwm.teach.systems.row`), so it needs no
model and serves the model's and the implementation's frames alike. The SVG draws the result
(`hwm.teach.svg`); the page animates the messages (`static/view.js`).

A message is a dict: `from`, `to` (server positions), `label`, `kind` (`append`, `reply`,
`vote`, `fetch`, `send`, `deliver`, `drop`, `in-flight`), `order` (0 travels first, 1 after it:
an append, then its reply), and the stretch of the arrow it travels, `start`..`stop` as
fractions (a sent message stops half way, in its channel; a delivered one leaves from there).
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from hwm.teach import systems
from hwm.teach.frame import Frame
from hwm.properties.snapshot import LEADER, server_name


def _position(name: Any) -> int | None:
    if isinstance(name, str) and name[:1] == "S" and name[1:].isdigit():
        return int(name[1:]) - 1
    return None


def _message(source: int, target: int, label: str, kind: str, order: int = 0,
             start: float = 0.0, stop: float = 1.0, lost: bool = False) -> dict:
    return {"from": source, "to": target, "label": label, "kind": kind, "order": order,
            "start": start, "stop": stop, "lost": lost}


def short(text: str) -> str:
    """A message as a label: `append [1@g1] hwm 0` (values and the entry before the batch left out)."""
    text = re.sub(r' "[^"]*"', "", text)
    text = re.sub(r" after \d+@g\d+", "", text)
    return text if len(text) <= 30 else text[:29] + "\u2026"


def in_flight(frame: Frame) -> list[tuple[int, int, str]]:
    """(from, to, text) of each message on the async network after the frame's step."""
    out = []
    for line in frame.in_flight:
        head, _, text = line.partition(": ")
        a, _, b = head.partition("->")
        if _position(a) is not None and _position(b) is not None:
            out.append((_position(a), _position(b), text))
    return out


def step_messages(before: Frame, frame: Frame) -> list[dict]:
    """The messages the frame's step sends, receives or loses, in the order they travel."""
    step = frame.step or {}
    action = step.get("action")
    old, new = before.state, frame.state
    n = len(new.servers)
    if action == "elect" and not hasattr(new.servers[0], "in_isr"):  # Kafka's controller elects: no votes
        c = _position(step.get("server"))
        voters = [_position(v) for v in step.get("voters", ())]
        if c is None:
            return []
        return [_message(v, c, f"vote g{new.servers[c].generation}", "vote") for v in voters
                if v is not None and v != c]
    if "leader" in step and "follower" in step and action in ("replicate", "sync"):
        leader, follower = _position(step["leader"]), _position(step["follower"])
        if leader is None or follower is None:
            return []
        after = new.servers[leader]
        if hasattr(new.servers[0], "in_isr"):  # Kafka: the follower fetches, the leader answers
            return [_message(follower, leader, f"fetch at {len(old.servers[follower].log)}", "fetch"),
                    _message(leader, follower, f"records, HW {after.hwm}", "reply", 1)]
        if after.role != LEADER and old.servers[leader].role == LEADER:
            reply = f"refused: g{old.servers[follower].generation}"
        else:
            match = getattr(after, "match", ())
            reply = f"ack {match[follower]}" if len(match) > follower else "ack"
        sent = len(old.servers[leader].log) - (old.servers[leader].match[follower]
                                                if len(getattr(old.servers[leader], "match", ())) > follower else 0)
        word = "sync" if action == "sync" else "append"
        return [_message(leader, follower, f"{word} {max(sent, 0)} entr{'y' if sent == 1 else 'ies'}, "
                                           f"hwm {old.servers[leader].hwm}", "append"),
                _message(follower, leader, reply, "reply", 1)]
    if action in ("send", "deliver", "drop"):
        a, b = _position(step.get("from")), _position(step.get("to"))
        if a is None or b is None:
            return []
        if action == "send":
            mine = [text for x, y, text in in_flight(frame) if (x, y) == (a, b)]
            lost = len(mine) == len([1 for x, y, _ in in_flight(before) if (x, y) == (a, b)])
            return [_message(a, b, "lost: channel full" if lost else short(mine[-1]), "send",
                             stop=0.5, lost=lost)]
        head = next((text for x, y, text in in_flight(before) if (x, y) == (a, b)), "message")
        if action == "deliver":
            return [_message(a, b, short(head), "deliver", start=0.5)]
        return [_message(a, b, "lost: " + short(head), "drop", start=0.5, stop=0.5, lost=True)]
    if "bookie" in step and hasattr(new, "fenced"):  # the writer adds, the recovery client fences and reads
        bookie = _position(step["bookie"])
        bookies = n - 2
        if bookie is None:
            return []
        client = bookies if action == "send_add" else bookies + 1
        word = {"send_add": "add entry", "fence": "fence, read LAC", "recovery_read": "recovery read"}.get(
            action, action)
        return [_message(client, bookie, word, "append"), _message(bookie, client, "reply", "reply", 1)]
    return []


def channel_messages(frame: Frame, skip_last_of: tuple[int, int] | None) -> list[dict]:
    """The messages waiting in the async network's channels (the one just sent is drawn moving)."""
    out = []
    waiting = in_flight(frame)
    for k, (a, b, text) in enumerate(waiting):
        is_last = all((x, y) != (a, b) for x, y, _ in waiting[k + 1:])
        if skip_last_of == (a, b) and is_last:
            continue
        out.append(_message(a, b, short(text), "in-flight", start=0.5, stop=0.5))
    return out


def quorum(before: Frame, frame: Frame) -> dict | None:
    """The quorum behind a leader's new high-water mark: which servers hold the new HWM index,
    by the leader's match indexes (its own log for itself), and the rule's arithmetic."""
    old, new = before.state, frame.state
    for k, server in enumerate(new.servers):
        match = getattr(server, "match", ())
        if not (server.alive and server.role == LEADER and match and server.hwm > old.servers[k].hwm):
            continue
        own = systems.row(new, k)
        members = list(own["match"])
        index = server.hwm
        holders = [j for j in members if (len(server.log) if j == k else match[j]) >= index]
        rule = next((line for line in frame.lines if "quorum index" in line or " = min LEO" in line), None)
        return {"leader": k, "index": index, "holders": holders, "members": members,
                "hwm": own["hwm"], "rule": rule}
    return None


def annotate(frames: Sequence[Frame]) -> Sequence[Frame]:
    """Fill each frame's `messages` and `quorum` from the frame before it (in place)."""
    for before, frame in zip(frames, frames[1:]):
        if frame.blocked:
            frame.messages, frame.quorum = channel_messages(frame, None), None
            continue
        try:
            moving = step_messages(before, frame)
            sent = next(((m["from"], m["to"]) for m in moving if m["kind"] == "send" and not m["lost"]), None)
            frame.messages = moving + channel_messages(frame, sent)
            frame.quorum = quorum(before, frame)
        except (IndexError, AttributeError, TypeError, KeyError, ValueError):
            # A state of another shape (another system's model, an implementation's snapshot): the
            # picture is drawn without the additions rather than not at all.
            frame.messages, frame.quorum = [], None
    if frames:
        frames[0].messages = channel_messages(frames[0], None)
    return frames


def mark_departure(a: Sequence[Frame], b: Sequence[Frame], names: tuple[str, str]) -> int | None:
    """Mark, on both columns, the first step where the same path parts under two protocols:
    a step one does not enable, or the first whose state or findings differ. Returns its number."""
    for fa, fb in zip(a[1:], b[1:]):
        if not (fa.blocked or fb.blocked or fa.state != fb.state or set(fa.violations) != set(fb.violations)):
            continue
        for mine, theirs, other in ((fa, fb, names[1]), (fb, fa, names[0])):
            own = [line for line in mine.lines if line not in theirs.lines]
            reason = (f"not enabled here: {mine.blocked}" if mine.blocked
                      else own[0] if own else ", ".join(f"{p} violated" for p in mine.violations) or "")
            mine.departs = f"the protocols part here (compare {other}): {reason}".rstrip(": ")
        return fa.number
    return None


def holders_text(q: dict) -> str:
    """`hwm 1 on S1: S1 and S3 hold index 1 (2 of 3)`, for the picture's quorum note."""
    who = " and ".join(server_name(j) for j in q["holders"]) or "no server"
    return (f"new {q['hwm']} {q['index']} on {server_name(q['leader'])}: {who} hold"
            f"{'s' if len(q['holders']) == 1 else ''} index {q['index']} ({len(q['holders'])} of {len(q['members'])})")
