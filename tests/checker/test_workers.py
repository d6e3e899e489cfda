"""The engine's worker processes (`checker.workers`): order, shared memory, errors, early exits.

Whole searches with workers are compared with one worker in tests/checker/test_engine.py;
here the exchange itself.
"""

import os

import numpy as np
import pytest

from hwm.checker.workers import Workers, WorkerFailed, _get, _put


def arrays(task):
    """A result shaped like a chunk's expansion: flat arrays, a set, a small header."""
    size = 1000 * (task % 7)
    return task, np.arange(size, dtype=np.uint64) * np.uint64(task), np.full(size, task, dtype=np.int32), {"bound"}


@pytest.fixture
def workers():
    pool = Workers(2, arrays)
    yield pool
    pool.close()


def test_results_come_back_in_order_owned_by_the_search(workers):
    results = list(workers.imap(range(40)))
    assert [r[0] for r in results] == list(range(40))
    for task, fps, actions, bounds in results:
        assert np.array_equal(fps, np.arange(1000 * (task % 7), dtype=np.uint64) * np.uint64(task))
        assert actions.tolist() == [task] * (1000 * (task % 7)) and bounds == {"bound"}
    # Writable copies: later tasks reuse the shared regions without changing what was returned.
    first = results[1][1].copy()
    results[1][1][:] = 0
    assert list(workers.imap(range(40)))[1][1].tolist() == first.tolist()


def test_large_buffers_cross_in_shared_memory_not_the_pipe():
    region = memoryview(bytearray(1 << 20))
    message = (np.arange(50_000, dtype=np.uint64), np.zeros((2048, 41), dtype=np.uint8), "a header")
    head, spans = _put(region, message)
    assert len(head) < 1000 and spans is not None  # 400 kB of arrays, a pickle of a few hundred bytes
    copy = _get(region, head, spans)
    assert np.array_equal(copy[0], message[0]) and np.array_equal(copy[1], message[1]) and copy[2] == "a header"
    # Too large for its region: the whole message goes through the pipe instead.
    head, spans = _put(memoryview(bytearray(1000)), message)
    assert spans is None and np.array_equal(_get(region, head, spans)[0], message[0])


def test_a_message_larger_than_its_region_still_arrives():
    pool = Workers(2, arrays, region=4096)
    try:
        assert [r[1].sum() for r in pool.imap(range(10))] == [arrays(t)[1].sum() for t in range(10)]
    finally:
        pool.close()


def test_an_answer_left_unread_is_not_taken_for_the_next_one(workers):
    """A search that stops mid-level (a state limit) leaves tasks in flight; the next level must not see them."""
    for task, *_ in workers.imap(range(10)):
        if task == 2:
            break
    assert [r[0] for r in workers.imap(range(100, 106))] == list(range(100, 106))


def failing(task):
    if task == 3:
        raise ValueError(f"bad task {task}")
    return task


def test_an_error_in_a_worker_is_raised_in_the_search():
    pool = Workers(2, failing)
    try:
        with pytest.raises(ValueError, match="bad task 3"):
            list(pool.imap(range(8)))
        assert list(pool.imap([4, 5, 6])) == [4, 5, 6]  # the workers go on
    finally:
        pool.close()


def dying(task):
    if task == 5:
        os._exit(3)
    return task


def test_a_worker_that_dies_is_reported_not_waited_for():
    pool = Workers(2, dying)
    try:
        with pytest.raises(WorkerFailed, match="exit code 3"):
            list(pool.imap(range(10)))
    finally:
        pool.close()


def test_a_slow_worker_holds_up_only_its_own_tasks():
    """While one worker is stuck on the first task, the other takes on the tasks after it (up to AHEAD each)."""
    import multiprocessing

    from hwm.checker.workers import AHEAD

    last = 2 * AHEAD - 1  # the last task sent while the first is unanswered
    done = multiprocessing.get_context("fork").Event()

    def work(task):
        if task == 0:
            return done.wait(timeout=20)  # True only if task `last` ran meanwhile, on the other worker
        if task == last:
            done.set()
        return True

    pool = Workers(2, work)
    try:
        assert list(pool.imap(range(last + 1))) == [True] * (last + 1)
    finally:
        pool.close()


def test_a_task_that_does_not_pickle_costs_no_slot(workers):
    for _ in range(5):  # more failures than the workers have slots
        with pytest.raises(Exception):
            list(workers.imap([1, lambda: None, 2]))
    assert [r[0] for r in workers.imap(range(12))] == list(range(12))



WORKERS_UNDER_A_PARENT_HANDLER = """
import multiprocessing, signal
from hwm.checker.workers import Workers, worker_signals

def handlers(task):
    return signal.getsignal(signal.SIGINT) is signal.SIG_IGN, signal.getsignal(signal.SIGTERM) is signal.SIG_DFL

if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda signum, frame: None)  # as a command run in this process may leave
    engine = Workers(1, handlers)
    print("engine", list(engine.imap([0])), flush=True)
    engine.close()  # terminate(), then join()
    tour = multiprocessing.get_context("fork").Pool(1, initializer=worker_signals)  # as checker/run.tour
    print("tour", tour.apply(handlers, (0,)), flush=True)
    tour.terminate()
    tour.join()
"""


def test_workers_leave_ctrl_c_to_the_search_and_die_on_terminate_whatever_the_parent_installed(tmp_path):
    """A SIGTERM handler in the parent (a command run in the same process installs one) must not reach
    a forked worker: terminate() would not stop it, and the parent would join it forever (the suite hung)."""
    import signal
    import subprocess
    import sys

    script = tmp_path / "workers.py"
    script.write_text(WORKERS_UNDER_A_PARENT_HANDLER)
    process = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        out, _ = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, _ = process.communicate()
        pytest.fail(f"the workers did not stop on terminate(): {out!r}")
    assert out.splitlines() == ["engine [(True, True)]", "tour (True, True)"]
    assert process.returncode == 0
