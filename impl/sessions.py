"""Client sessions: what makes a retried put apply once, in bounded memory (Raft dissertation §6.3).

A client opens a session by writing a registration entry (`RegisterClient`), then names each put
with its client id and a request id, new for each value. Every server applies its committed entries
in log order to the same table: per client only the latest request id applied and its result (the
index the put was committed at). The table holds at most `limit` sessions; applying an entry makes
its client the most recently used, and the least recently used session beyond the limit is evicted.
Both are decided by the log alone, so every server that applied the same prefix holds the same
table (the limit must be the same on every server).

A put whose request id is its session's latest is answered with the recorded index instead of being
written again. A put of a client without a session (never opened, or evicted), or older than its
latest, is refused with `SESSION_EXPIRED`: whether that request was written can no longer be told,
and writing it again could apply it twice. The client opens a new session; a put it may already
have written ends in an unknown outcome rather than a duplicate.

Registrations are harmless to repeat (applying one for a client that has a session only makes it
the most recently used), which is why a session is opened by an entry of its own and not by a
client's first put: a first put retried after its session was evicted would otherwise be written
twice.
"""

from __future__ import annotations

from collections import OrderedDict

__all__ = ["DEFAULT_MAX_SESSIONS", "REGISTRATION", "Sessions"]

DEFAULT_MAX_SESSIONS = 1024
REGISTRATION = 0  # the request id of a registration entry (a put's request id is at least 1)


class Sessions:
    """The session table of one server: client id -> (latest request id applied, its index)."""

    def __init__(self, limit: int = DEFAULT_MAX_SESSIONS):
        if type(limit) is not int or limit < 1:
            raise ValueError(f"max_sessions: expected an int >= 1, got {limit!r}")
        self.limit = limit
        self.latest: OrderedDict[str, tuple[int, int]] = OrderedDict()  # least recently used first
        self.applied = 0  # entries 1..applied were applied, in order
        self.evicted = 0  # sessions evicted so far (a statistic)

    def apply(self, index: int, ids: tuple[str, int] | None) -> None:
        """Apply the committed entry at `index` (the next one: applied + 1), named `ids` or not."""
        if index != self.applied + 1:
            raise ValueError(f"sessions: entry {index} applied after entry {self.applied}; entries "
                             "are applied in log order, each once")
        self.applied = index
        if ids is None:
            return
        client, request = ids
        known = self.latest.get(client)
        if known is None or request > known[0]:
            # A registration opens a session at request id 0; a put records its request and
            # index. (A put whose session was evicted after it was written reopens it: what is
            # in the log is applied, on every server alike.)
            self.latest[client] = (request, index)
        self.latest.move_to_end(client)
        while len(self.latest) > self.limit:
            self.latest.popitem(last=False)
            self.evicted += 1

    def reset(self) -> None:
        """Forget everything (applied entries were removed: the table is rebuilt from the log)."""
        self.latest.clear()
        self.applied = 0

    def __len__(self) -> int:
        return len(self.latest)
