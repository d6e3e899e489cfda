"""Planted bugs: the runtime with one promise broken, each a node or a storage class the simulation
runs in place of the real one."""

from __future__ import annotations

import asyncio

from hwm.impl import messages as m
from hwm.impl.core import persist
from hwm.impl.runtime import Node
from hwm.impl.storage import DiskStorage


# ------------------------------------------------------------------------ planted bugs
class _NoFsyncStorage(DiskStorage):
    """Planted bug: `sync` hands the records to the OS but never fsyncs them."""

    def sync(self) -> None:
        self.wal.flush()


class _SendBeforePersistNode(Node):
    """Planted bug: sends the batch's messages and answers before making the batch durable."""

    async def _flush(self) -> None:
        replica = self.replica
        if not replica.has_ready():
            return await Node._flush(self)
        ready = replica.ready()
        for to, message in ready.messages:
            link = self._links.get(to)
            if link is not None:
                link.send(message)
        for entry in ready.entries:
            self._remember(entry.index, entry.payload)
        for entry in ready.committed:
            if entry.index in self._pending:
                self._confirm(entry)
        answers, self._answers = self._answers, []
        for connection, slot, message, close in answers:
            connection.answer(slot, message, close)
        if ready.truncate_from is not None or ready.entries or ready.metadata is not None:
            await asyncio.to_thread(persist, ready, self.storage)


class _AckOnAppendNode(Node):
    """Planted bug: a leader confirms a put once its own log holds it, not once it is committed."""

    def _answer_put(self, request, connection, slot) -> None:
        waiting = len(self._pending_by_deadline)
        super()._answer_put(request, connection, slot)
        if len(self._pending_by_deadline) > waiting:
            pending = self._pending_by_deadline[-1]
            pending.done = True
            self._pending[pending.index].remove(pending)
            if not self._pending[pending.index]:
                del self._pending[pending.index]
            self._answers.append((connection, slot, m.PutReply(pending.index), False))


class _RetryWrittenAgainNode(Node):
    """Planted bug: a retried put whose entry the log holds (not yet applied) is written again,
    as if the session had never seen it."""

    def _written(self, ids):
        return None


# name -> (node class, storage class)
PLANTS: dict[str | None, tuple[type[Node], type[DiskStorage]]] = {
    None: (Node, DiskStorage),
    "skip-fsync": (Node, _NoFsyncStorage),
    "send-before-persist": (_SendBeforePersistNode, DiskStorage),
    "ack-on-append": (_AckOnAppendNode, DiskStorage),
}
# Caught by a pinned schedule (tests/sim/test_dst_clients.py) rather than searched for by default.
SESSION_PLANTS: dict[str, tuple[type[Node], type[DiskStorage]]] = {
    "retry-written-again": (_RetryWrittenAgainNode, DiskStorage),
}
