"""Forked worker processes for the breadth-first engine, exchanging chunks through shared memory.

`Workers(count, work)` forks `count` processes that each run `work(task)` on the
tasks the search sends; `imap(tasks)` returns the results in the order of the
tasks, as `multiprocessing.Pool.imap` would. Each worker has `SLOTS` tasks in
flight; a task goes to a worker with a free slot, so one that the machine's
other load slows down holds up only its own tasks.

Why not a `Pool`: with a compiled successor backend a chunk's results (about 40
bytes per transition: fingerprint, parent, action, and the rows of the first
occurrences) cost a quarter as much to pickle, push through a pipe in 64 kB
pieces, read back and unpickle as the chunk costs to expand, and the search's
process, which also merges every chunk, spent its time on that. Here each (worker, slot) pair
owns a region of anonymous shared memory mapped before the fork: a task or result
is pickled with protocol 5, its large buffers (numpy arrays) are copied once into
the region out of band, and only the small pickle that names them crosses the
pipe. The receiver copies them out (so the region is free again at once and
nothing it returns aliases shared memory). A message whose buffers do not fit
its region goes through the pipe whole.

A task and its result share one region: the worker has copied the task out
before it writes the result, and the search sends the next task for a slot only
once it has read that slot's result.
"""

from __future__ import annotations

import mmap
import multiprocessing
import multiprocessing.connection
import pickle
import signal
import traceback
from collections import deque
from typing import Any, Callable, Iterable, Iterator

__all__ = ["Workers", "WorkerFailed", "SLOTS", "AHEAD", "REGION"]

SLOTS = 2  # tasks in flight per worker: one to work on while the search reads the other's result
AHEAD = 4  # answers per worker read ahead of the one the search waits for
REGION = 64 << 20  # bytes of address space per slot; pages are only used as far as messages reach


class WorkerFailed(RuntimeError):
    """A worker process stopped without answering (killed, out of memory)."""


def _put(region: memoryview, message: Any) -> tuple[bytes, list[tuple[int, int]] | None]:
    """The message's pickle, its out-of-band buffers copied into `region`; spans None if it did not fit."""
    buffers: list[pickle.PickleBuffer] = []
    head = pickle.dumps(message, protocol=5, buffer_callback=buffers.append)
    spans, at = [], 0
    for buffer in buffers:
        raw = buffer.raw()
        end = at + raw.nbytes
        if end > len(region):
            return pickle.dumps(message, protocol=5), None
        region[at:end] = raw
        spans.append((at, end))
        at = end
    return head, spans


def _get(region: memoryview, head: bytes, spans: list[tuple[int, int]] | None) -> Any:
    """The message `_put` wrote, its buffers copied out of the region (writable, owned by the receiver)."""
    if spans is None:
        return pickle.loads(head)
    return pickle.loads(head, buffers=[bytearray(region[a:b]) for a, b in spans])


def worker_signals() -> None:
    """A forked worker leaves Ctrl-C to its parent (it reaches every process: the parent answers it)
    and dies on terminate(): SIGTERM goes back to its default, whatever handler the parent had (a
    handler inherited from a command run in the same process left a pool worker alive, and its
    parent joined it forever)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _serve(connection, regions: list[memoryview], work: Callable[[Any], Any]) -> None:
    """A worker's loop: a task in a slot's region, its result (or the exception) back in the same region."""
    worker_signals()
    while True:
        try:
            slot, head, spans = pickle.loads(connection.recv_bytes())
        except EOFError:  # the search closed its end: done
            return
        region = regions[slot]
        try:
            result = work(_get(region, head, spans))
            answer = (True, *_put(region, result))
        except BaseException as error:  # noqa: BLE001 - every failure goes back to the search
            try:
                failure = pickle.dumps(error, protocol=5)
                pickle.loads(failure)
            except Exception:  # an exception that does not pickle: its text
                failure = pickle.dumps(RuntimeError(f"in a worker process: {error!r}"), protocol=5)
            answer = (False, failure, traceback.format_exc())
        connection.send_bytes(pickle.dumps(answer, protocol=5))


class Workers:
    """`count` forked processes running `work`; tasks and results cross in shared memory."""

    def __init__(self, count: int, work: Callable[[Any], Any], region: int = REGION):
        context = multiprocessing.get_context("fork")
        self._maps = [[mmap.mmap(-1, region) for _ in range(SLOTS)] for _ in range(count)]
        self._regions = [[memoryview(m) for m in maps] for maps in self._maps]
        self._connections = []
        self._processes = []
        for regions in self._regions:
            ours, theirs = context.Pipe()
            process = context.Process(target=_serve, args=(theirs, regions, work), daemon=True)
            process.start()
            theirs.close()  # only the worker holds its end: its exit reads as EOF here
            self._connections.append(ours)
            self._processes.append(process)
        self._free = [deque(range(SLOTS)) for _ in range(count)]
        self._asked: list[deque[tuple[int, int]]] = [deque() for _ in range(count)]  # (task number, slot)

    def imap(self, tasks: Iterable[Any]) -> Iterator[Any]:
        """`work(task)` for each task, in order; tasks are taken from the iterable as slots free up.

        A task goes to whichever worker has a free slot, and answers are read as they
        come (a worker answers in the order it was asked), so a worker the machine's
        other load slows down holds up only its own tasks; at most `AHEAD` answers per
        worker wait here for an earlier one.
        """
        self._drain()
        tasks = enumerate(tasks)
        asked, free, connections = self._asked, self._free, self._connections
        window = AHEAD * len(free)
        answers: dict[int, tuple[bool, Any]] = {}
        wanted, sent, left = 0, 0, True  # the task to yield next, the tasks sent, whether tasks are left

        while True:
            while left and sent - wanted < window and any(free):
                worker = max(range(len(free)), key=lambda w: len(free[w]))
                number, task = next(tasks, (None, None))
                if number is None:
                    left = False
                    break
                slot = free[worker].popleft()
                try:
                    head, spans = _put(self._regions[worker][slot], task)
                    connections[worker].send_bytes(pickle.dumps((slot, head, spans), protocol=5))
                except OSError:
                    raise self._failed(worker) from None
                except BaseException:  # a task that does not pickle: the slot stays usable
                    free[worker].appendleft(slot)
                    raise
                asked[worker].append((number, slot))
                sent += 1
            if wanted in answers:
                ok, result = answers.pop(wanted)
                if not ok:
                    raise result
                yield result
                wanted += 1
                continue
            busy = [connections[w] for w in range(len(asked)) if asked[w]]
            if not busy:
                return
            for connection in multiprocessing.connection.wait(busy):
                worker = connections.index(connection)
                number, slot = asked[worker].popleft()
                answers[number] = self._receive(worker, slot)

    def _drain(self) -> None:
        """Read the answers to tasks of an earlier imap that was left early (a state limit, an error)."""
        for worker, asked in enumerate(self._asked):
            while asked:
                self._receive(worker, asked.popleft()[1])

    def _receive(self, worker: int, slot: int) -> tuple[bool, Any]:
        """(True, result) or (False, the worker's exception) for the task in (worker, slot); frees the slot."""
        try:
            ok, head, spans = pickle.loads(self._connections[worker].recv_bytes())
        except (EOFError, OSError):  # its end of the pipe closed: it is gone
            raise self._failed(worker) from None
        self._free[worker].append(slot)
        if not ok:
            error = pickle.loads(head)
            error.__cause__ = RuntimeError(f"in worker process {worker + 1}:\n{spans}")
            return False, error
        return True, _get(self._regions[worker][slot], head, spans)

    def _failed(self, worker: int) -> WorkerFailed:
        self._processes[worker].join(timeout=5)
        return WorkerFailed(f"worker process {worker + 1} stopped without answering (exit code "
                            f"{self._processes[worker].exitcode}; killed for lack of memory?)")

    def close(self) -> None:
        """Stop the workers (at once, even mid-task) and release the shared memory."""
        for connection in self._connections:
            connection.close()
        for process in self._processes:
            process.terminate()
        for process in self._processes:
            process.join()
        for regions in self._regions:
            for view in regions:
                view.release()
        for maps in self._maps:
            for m in maps:
                m.close()
        self._connections, self._processes, self._regions, self._maps = [], [], [], []
