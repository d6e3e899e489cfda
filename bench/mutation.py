"""A mutation score for impl/, bridge/ and the observed-state validators of checker/: small semantic
mutants of one module at a time, each run against the tests that cover that module; a mutant the
tests still pass *survives*.

    nice -n 5 python bench/mutation.py [--seed 0] [--budget 3000] [--scale 1.0] [--file impl/wal.py ...]
                                       [--json results.json] [--point impl/wal.py:123 ...] [--tests PYTEST-ARGS...]

Every module of impl/ and bridge/, and checker/observed*.py, is a target (TARGETS: its test subset
and its sample size; a module with no mutation point is listed with none). For each target the runner lists every mutation
point, draws a sample stratified by operator (each operator's share of the module's points, at
least one of each while the size allows) with a generator seeded by `--seed` and the module's path,
so one module's sample does not depend on which others run. It runs the subset once on the file as
`ast.unparse` prints it (the clean run, which must pass), then for each sampled point writes the
mutated source over the file, runs the subset (`python -m pytest -x -q -n 0 -p no:cacheprovider
...`, bytecode caching off) with a time limit of three times the clean run (at least ten seconds
more than it), and puts the original bytes back (in a `finally`, SIGTERM included; the file is
checked against them at the end). No mutant starts after `--budget` seconds. It prints, per package
and per module, the mutants run, killed, timed out (counted as killed: the tests did not pass) and
survived; survivors are printed as file:line, operator, point number and the mutated line, to be
killed by a new test or argued equivalent (docs/mutation.md).

Operators (one change per mutant): a comparison flipped to its neighbour or negation (`<` `<=`,
`==` `!=`, `in` `not in`, `is` `is not`), `and`/`or` swapped, a `not` dropped, `+`/`-` swapped, an
integer constant n made n + 1, `True`/`False` swapped, and a statement that only calls something
(`self._fs.fsync(fd)`, `link.send(m)`) deleted, the "skipped step" that crash bugs are made of; and
the slips a guard is made of: one operand of an `and`/`or` dropped (a guard's conjunct gone), `x is
not None` read as the truthiness of `x` (`x is None` as `not x`: an offset or index 0 is falsy),
`max(old, new)` or `min(...)` replaced by one of its arguments (a value that may go backwards), and
a write asked to be durable (`durable=True`, `sync=True`, `fsync=True`) made plain.

Why a runner of our own: mutmut 3 imports its mutants under module names derived from the file's
path, and this project installs `impl/wal.py` as `hwm.impl.wal` (a package-dir mapping), so its
trampolines would never be imported; cosmic-ray mutates in place like this runner, but runs every
mutant of a session with one test command and has no sampling or time budget, which a loaded
two-core machine needs (the targets hold about 8,900 mutation points, 2,000 of them from the four
operators of a guard's slips; the sample is 263 of them, 3 %).
The runner writes over the checkout's files: run nothing else in the same checkout meanwhile.

Measured after the tests for the guard operators' survivors (seed 0, one process, on a loaded
two-core machine; the whole sample was not run again, docs/mutation.md has the last full score):
`--file impl/bookkeeper.py --file checker/observed_kafka.py --file checker/observed.py` ran 28
mutants in 1,194 s: impl/bookkeeper.py 6 of 8 killed (one timed out), checker/observed_kafka.py 8
of 12, checker/observed.py 3 of 8; 17 of 28 (61 %). One survivor was killed after the run (the
filter of a leader's replies left on their way, tests/checker/test_observed.py); of the other ten,
eight are argued equivalent (a hole written over a hole, a state directory that is never "", a
tuple that is never empty there, a set that only saves repeats, a state tuple's truthiness, an
empty log that gives no shorter fetch, a crashed leader's role, a refusal the model's own
replication already gives) and two guard the order of a recorded run's changes (followers first;
a restart carrying a granted vote's generation): both killed since by tests of their own
(docs/mutation.md, "The observed-state validators and the stdio node").
Run with `--point`, the mutants that make the slips the four new operators are named for are
killed: impl/wal.py:380, impl/bookkeeper.py:240, impl/kafka.py:91, bridge/maelstrom/history.py:40,
41, 66-69 (history.py:42 drops `value is not None`: equivalent, no polled message is None).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import resource
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass(frozen=True)
class Target:
    """A module's test subset (pytest arguments: files, node ids, -k) and how many mutants to draw."""

    tests: tuple[str, ...]
    sample: int


# module -> the tests that exercise it, fast enough to run once per mutant (no -m deep, no long
# searches), and the sample drawn from its mutation points: 3 to 4 % of a module's points, fewer
# where its subset is slow, so that the whole run takes about 40 minutes of one core (docs/mutation.md).
RUNTIME_FAST = ("tests/impl/test_runtime.py", "-k", "not full_disk and not restarting_server")
NODES = "tests/nodes/"
SERVERS = "tests/servers/"
TARGETS: dict[str, Target] = {
    # impl/
    "impl/__init__.py": Target((), 0),
    "impl/client.py": Target((*RUNTIME_FAST, "tests/impl/test_sessions.py", "tests/impl/test_checked_arguments.py",
                              "tests/impl/test_client_outcomes.py"), 6),
    "impl/codec.py": Target(("tests/impl/test_codec.py", "tests/impl/test_codec_counts.py",
                             "tests/impl/test_codec_frame_limit.py", "tests/impl/test_codec_bounds.py"), 9),
    "impl/controller.py": Target((
        "tests/impl/test_controller_durability.py", "tests/sim/test_dst_kafka.py", "tests/sim/test_dst_controller_state.py",
        "tests/impl/test_kafka_runtime.py::test_a_restarted_controller_goes_on_from_its_saved_epoch_and_isr",
        "tests/impl/test_kafka_runtime.py::test_a_second_controller_on_the_same_state_exits_2_naming_the_holder",
        "tests/impl/test_kafka_runtime.py::test_a_damaged_partition_state_stops_the_controller_naming_the_file",
        "tests/impl/test_kafka_runtime.py::test_garbage_and_foreign_messages_to_a_kafka_broker_or_its_controller_"
        "are_refused_by_name"), 6),
    "impl/core.py": Target(("tests/impl/test_core.py", "tests/impl/test_vote_durability.py",
                            "tests/impl/test_core_quorum.py"), 12),
    "impl/fs.py": Target(("tests/impl/test_fs_seam.py", "tests/impl/test_fs_os_calls.py",
                          "tests/impl/test_storage.py", "tests/impl/test_checked_arguments.py"), 4),
    "impl/kafka.py": Target(("tests/impl/test_kafka.py", "tests/sim/test_dst_kafka.py",
                             "tests/impl/test_controller_durability.py",
                             "tests/impl/test_kafka_runtime.py::test_a_follower_behind_for_no_longer_than_the_lag_stays_in_the_isr"),
                            15),
    "impl/messages.py": Target(("tests/impl/test_codec.py", "tests/impl/test_codec_counts.py",
                                "tests/impl/test_kafka.py", "tests/impl/test_zab.py",
                                "tests/impl/test_checked_arguments.py"), 10),
    "impl/recorder.py": Target(("tests/impl/test_recorded_runs.py", "tests/conformance/test_recorded_simcluster.py",
                                "tests/impl/test_recorder_parts.py"), 4),
    "impl/runtime.py": Target(("tests/impl/test_runtime.py", "tests/sim/test_dst_clients.py::test_a_put_whose_entry_"
                               "another_leader_replaced_is_not_confirmed",
                               "tests/variants/test_variant_hook_failures.py::test_a_tcp_node_whose_rule_raises_stops_"
                               "with_one_line"), 8),
    "impl/sessions.py": Target(("tests/impl/test_sessions.py", "tests/impl/test_runtime.py", "-k",
                                "session or retr or Session or latest or evicted or entries"), 3),
    "impl/stdio.py": Target(("tests/impl/test_stdio.py",), 8),
    "impl/stdio_controller.py": Target(("tests/impl/test_stdio.py", "tests/impl/test_stdio_state_answer.py",
                                        "tests/impl/test_stdio_hwm_test.py"), 3),
    "impl/storage.py": Target(("tests/impl/test_storage.py", "tests/impl/test_vote_durability.py",
                               "tests/impl/test_storage_entry_bounds.py"), 5),
    "impl/wal.py": Target(("tests/impl/test_wal.py", "-k", "not crash_recovery", "tests/sim/test_reordering_disk.py",
                           "tests/impl/test_wal_descriptors.py"), 15),
    "impl/bookkeeper.py": Target(("tests/impl/test_bookkeeper.py", "tests/impl/test_bookkeeper_ensembles.py",
                                  "tests/conformance/test_bookkeeper_conformance.py",
                                  "tests/impl/test_bookkeeper_reads.py"), 8),
    "impl/bookie_server.py": Target(("tests/impl/test_bookkeeper_runtime.py",), 4),
    "impl/zab.py": Target(("tests/impl/test_zab.py", "tests/sim/test_dst_zab.py", "tests/impl/test_zab_durable_hwm.py",
                           "-k", "not derandomized"), 8),
    # bridge/
    "bridge/__init__.py": Target((), 0),
    "bridge/replay.py": Target(("tests/conformance/test_conformance.py::test_a_violation_is_written_as_a_trace_that_"
                                "replays_as_is", "tests/impl/test_zab.py", "tests/checker/test_lasso_open_obligations.py",
                                "tests/checker/test_liveness.py::test_catalogue_lasso_replays_on_the_implementation"), 2),
    "bridge/conformance/__init__.py": Target((), 0),
    "bridge/conformance/hunting.py": Target(("tests/conformance/test_hunt_counts.py",
                                             "tests/conformance/test_conformance.py"), 1),
    "bridge/conformance/kill_matrix.py": Target(("tests/quality/test_kill_matrix.py", "-k",
                                                 "not raft-truncate-to-own-hwm and not zab-ack"), 2),
    "bridge/conformance/machine.py": Target(("tests/conformance/test_conformance.py",
                                             "tests/conformance/test_hunt_counts.py"), 4),
    "bridge/dst/__init__.py": Target((), 0),
    "bridge/dst/simulation.py": Target(("tests/sim/test_dst_plants.py", "tests/sim/test_dst_zab.py",
                                        "tests/sim/test_dst_clients.py", "tests/sim/test_dst_reordering.py",
                                        "tests/sim/test_dst_kafka.py", "tests/sim/test_dst_events.py",
                                        "tests/sim/test_dst_acknowledged_index.py", "tests/sim/test_dst_settle.py",
                                        "tests/sim/test_dst_crash_in_persist.py"), 11),
    "bridge/dst/schedule.py": Target(("tests/sim/test_dst_events.py", "tests/sim/test_dst_plants.py"), 2),
    "bridge/dst/plants.py": Target(("tests/sim/test_dst_plants.py", "tests/sim/test_dst_acknowledged_index.py",
                                    "tests/sim/test_dst_clients.py"), 1),
    "bridge/dst/run.py": Target(("tests/sim/test_dst_plants.py", "tests/sim/test_dst_kafka.py",
                                 "tests/sim/test_dst_zab.py"), 1),
    "bridge/dst/disk.py": Target(("tests/sim/test_simdisk.py", "tests/sim/test_reordering_disk.py",
                                  "tests/sim/test_simdisk_truncation.py", "tests/sim/test_disk_witnesses.py",
                                  "tests/sim/test_dst_controller_state.py", "tests/sim/test_simdisk_write_like.py"), 10),
    "bridge/dst/bookkeeper.py": Target(("tests/sim/test_dst_bookkeeper.py",), 4),
    "bridge/dst/kafka.py": Target(("tests/sim/test_dst_kafka.py", "tests/sim/test_dst_clients.py",
                                   "tests/sim/test_disk_witnesses.py", "tests/sim/test_dst_controller_state.py"), 6),
    "bridge/dst/net.py": Target(("tests/sim/test_simnet.py", "tests/sim/test_dst_kafka.py",
                                 "tests/sim/test_dst_crash_in_persist.py"), 6),
    "bridge/dst/ordering.py": Target(("tests/sim/test_reordering_disk.py", "tests/sim/test_dst_reordering.py",
                                      "tests/sim/test_counted_log_reopen.py"), 4),
    "bridge/maelstrom/__init__.py": Target((), 0),
    "bridge/maelstrom/cluster.py": Target((NODES + "test_protocol_errors.py", NODES + "test_cli.py",
                                           NODES + "test_examples.py", NODES + "test_narrated_drops.py"), 8),
    "bridge/maelstrom/history.py": Target((NODES + "test_parts.py", NODES + "test_examples.py"), 5),
    "bridge/maelstrom/hunt.py": Target((NODES + "test_hunt.py", NODES + "test_examples.py", NODES + "test_cli.py",
                                        NODES + "test_parts.py", NODES + "test_hunt_errors.py"), 6),
    "bridge/maelstrom/lin_kv.py": Target((NODES + "test_lin_kv.py", "tests/checker/test_linearizable.py"), 3),
    "bridge/maelstrom/observe.py": Target((NODES + "test_parts.py", NODES + "test_examples.py",
                                           NODES + "test_introspection.py"), 3),
    "bridge/maelstrom/process.py": Target((NODES + "test_protocol_errors.py", NODES + "test_examples.py"), 4),
    "bridge/maelstrom/protocol.py": Target((NODES + "test_protocol_errors.py", NODES + "test_parts.py"), 2),
    "bridge/maelstrom/replay.py": Target((NODES + "test_examples.py",), 2),
    "bridge/maelstrom/schedule.py": Target((NODES + "test_parts.py", NODES + "test_cli.py", NODES + "test_examples.py"), 4),
    "bridge/maelstrom/services.py": Target((NODES + "test_parts.py", NODES + "test_examples.py"), 2),
    "bridge/maelstrom/validation.py": Target((NODES + "test_protocol_errors.py", NODES + "test_cli.py",
                                              NODES + "test_model_steps_unit.py"), 3),
    "bridge/servers/__init__.py": Target((), 0),
    "bridge/servers/adapter.py": Target((SERVERS + "test_etcd.py", SERVERS + "test_status_checks.py"), 2),
    "bridge/servers/etcd.py": Target((SERVERS + "test_etcd.py", SERVERS + "test_etcd_lin_kv.py"), 3),
    "bridge/servers/hunt.py": Target((SERVERS + "test_etcd.py",), 2),
    "bridge/servers/lifecycle.py": Target((SERVERS + "test_etcd.py",), 3),
    "bridge/servers/netfilter.py": Target((SERVERS + "test_etcd.py",), 2),
    "bridge/servers/powerfs.py": Target((SERVERS + "test_powerfs.py",), 3),
    "bridge/servers/registry.py": Target((SERVERS + "test_etcd.py", SERVERS + "test_zookeeper.py"), 1),
    "bridge/servers/run.py": Target((SERVERS + "test_etcd.py", SERVERS + "test_status_checks.py",
                                     SERVERS + "test_etcd_lin_kv.py"), 3),
    "bridge/servers/zookeeper.py": Target((SERVERS + "test_zookeeper.py", SERVERS + "test_zookeeper_cas.py"), 2),
    "bridge/simcluster/__init__.py": Target((), 0),
    "bridge/simcluster/cluster.py": Target(("tests/conformance/test_simcluster.py",
                                            "tests/conformance/test_recorded_simcluster.py",
                                            "tests/impl/test_core.py"), 5),
    "bridge/simcluster/network.py": Target(("tests/conformance/test_simcluster.py",), 1),
    "bridge/simcluster/drivers.py": Target(("tests/conformance/test_simcluster.py", "tests/impl/test_zab.py"), 2),
    "bridge/simcluster/bookkeeper.py": Target(("tests/conformance/test_bookkeeper_conformance.py",
                                               "tests/conformance/test_bookkeeper_cluster_options.py"), 3),
    "bridge/simcluster/kafka.py": Target(("tests/impl/test_kafka.py", "tests/conformance/test_simcluster.py"), 3),
    "bridge/simcluster/record.py": Target(("tests/conformance/test_recorded_simcluster.py",), 1),
    "bridge/simcluster/registry.py": Target(("tests/conformance/test_simcluster.py",), 1),
    "bridge/simcluster/zab.py": Target(("tests/impl/test_zab.py", "tests/conformance/test_simcluster.py"), 4),
    # checker/: the observed-state validators, whose relaxations a wrong guard turns into false negatives
    "checker/observed.py": Target(("tests/checker/test_observed.py", "tests/checker/test_causality.py",
                                   "tests/nodes/test_model_steps_unit.py"), 8),
    "checker/observed_kafka.py": Target(("tests/checker/test_observed_kafka.py",
                                         "tests/checker/test_observed_kafka_real_steps.py"), 12),
    "checker/observed_zab.py": Target(("tests/checker/test_observed_zab.py",), 6),
}
_FLIPS = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
          ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}


@dataclass
class Mutant:
    path: str
    number: int  # the mutation point's position in the file's walk
    line: int
    operator: str
    status: str = ""  # killed | survived | timeout | unchanged
    seconds: float = 0.0
    mutated_line: str = ""


# Keyword arguments that ask for a durable write: `durable=True` made False is the plain write a
# crash loses (its own operator, not one more True/False).
DURABLE_KEYWORDS = frozenset({"durable", "sync", "fsync"})


def _min_max(node: ast.AST) -> bool:
    """A call max(a, b, ...) or min(a, b, ...) of plain positional arguments."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("max", "min")
            and len(node.args) >= 2 and not node.keywords and not any(isinstance(a, ast.Starred) for a in node.args))


def _points(tree: ast.AST) -> list[tuple[ast.AST, str]]:
    """Every (node, operator) this runner can mutate, in a fixed walk order. For the operators that
    remove a part ("drop operand", "max/min -> one argument") the node is the operand dropped or the
    argument kept."""
    durable = {id(k.value) for k in ast.walk(tree) if isinstance(k, ast.keyword) and k.arg in DURABLE_KEYWORDS
               and isinstance(k.value, ast.Constant) and k.value.value is True}
    points = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and type(node.ops[0]) in _FLIPS:
            points.append((node, "compare"))
        elif isinstance(node, ast.BoolOp):
            points.append((node, "and/or"))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            points.append((node, "drop not"))
        elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
            points.append((node, "+/-"))
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            points.append((node, "n+1"))
        elif isinstance(node, ast.Constant) and id(node) in durable:
            points.append((node, "durable -> plain"))
        elif isinstance(node, ast.Constant) and type(node.value) is bool:
            points.append((node, "True/False"))
        elif isinstance(node, ast.Expr) and isinstance(node.value, (ast.Call, ast.Await)):
            points.append((node, "delete call"))
        # Besides the one above: a guard's conjunct (or disjunct) dropped, `x is not None` read as
        # the truthiness of x (an integer 0 is falsy), max(old, new) made new.
        if isinstance(node, ast.BoolOp):
            points += [(value, "drop operand") for value in node.values]
        if _truthiness(node) is not None:
            points.append((node, "truthiness"))
        if _min_max(node):
            points += [(argument, "max/min -> one argument") for argument in node.args]
    return points


def _truthiness(node: ast.AST) -> ast.AST | None:
    """`x is not None` -> `x`, `x is None` -> `not x` (None where the node is no such test)."""
    if (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Is, ast.IsNot))
            and isinstance(node.comparators[0], ast.Constant) and node.comparators[0].value is None):
        return node.left if isinstance(node.ops[0], ast.IsNot) else ast.UnaryOp(ast.Not(), node.left)
    return None


class _Apply(ast.NodeTransformer):
    def __init__(self, target: ast.AST, operator: str):
        self.target, self.operator = target, operator

    def visit(self, node):
        op = self.operator
        if op == "drop operand" and isinstance(node, ast.BoolOp) and any(v is self.target for v in node.values):
            node.values = [v for v in node.values if v is not self.target]
            return node.values[0] if len(node.values) == 1 else node
        if op == "max/min -> one argument" and _min_max(node) and any(a is self.target for a in node.args):
            return self.target
        if node is not self.target:
            return self.generic_visit(node)
        if op == "compare":
            node.ops[0] = _FLIPS[type(node.ops[0])]()
        elif op == "and/or":
            node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        elif op == "drop not":
            return node.operand
        elif op == "+/-":
            node.op = ast.Sub() if isinstance(node.op, ast.Add) else ast.Add()
        elif op == "n+1":
            node.value += 1
        elif op in ("True/False", "durable -> plain"):
            node.value = not node.value
        elif op == "truthiness":
            return _truthiness(node)
        elif op == "delete call":
            return ast.copy_location(ast.Pass(), node)
        return node


def mutate(source: str, number: int) -> tuple[str, int, str]:
    """The source with mutation point `number` applied: (text, line, operator)."""
    tree = ast.parse(source)
    node, operator = _points(tree)[number]
    line = node.lineno
    _Apply(node, operator).visit(tree)
    return ast.unparse(ast.fix_missing_locations(tree)), line, operator


def _clear_bytecode(path: str) -> None:
    cache = os.path.join(os.path.dirname(path), "__pycache__")
    stem = os.path.splitext(os.path.basename(path))[0] + "."
    if os.path.isdir(cache):
        for name in os.listdir(cache):
            if name.startswith(stem):
                os.unlink(os.path.join(cache, name))


def _changed_line(before: list[str], after: list[str]) -> str:
    for old, new in zip(before, after):
        if old != new:
            return (new.strip() if new.strip() != "pass" else f"pass  # was: {old.strip()}")[:140]
    return "(no visible change)"


def run_tests(tests: tuple[str, ...] | list[str], timeout: float) -> str:
    marker = f"HWM_MUTATION_RUN={os.getpid()}-{time.monotonic_ns()}"
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", HYPOTHESIS_PROFILE="ci")
    env.update([marker.split("=", 1)])
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-n", "0", "-p", "no:cacheprovider", *tests]
    try:
        result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout"
    finally:
        _kill_left_behind(marker)
    return "survived" if result.returncode == 0 else "killed"


def _kill_left_behind(marker: str) -> None:
    """Kill what a test run started and left running: a mutant can break a test's clean-up (a timed-out
    run's pytest is killed alone), and a node in a session of its own outlives its process group. Each
    carries the run's marker in its environment, inherited from the pytest process."""
    wanted = marker.encode()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as environ:
                if wanted in environ.read().split(b"\0"):
                    os.kill(int(pid), signal.SIGKILL)
        except OSError:  # gone meanwhile, or not ours to read
            continue


def stratified_sample(points: list[tuple[ast.AST, str]], size: int, seed: int, relative: str) -> list[int]:
    """`size` point numbers, each operator getting its share of the module's points (largest
    remainders round up; every operator at least one while the size allows), drawn at random
    within each operator by a generator seeded by the seed and the module's path alone."""
    rng = random.Random(f"{seed}:{relative}")
    by_operator: dict[str, list[int]] = defaultdict(list)
    for number, (_, operator) in enumerate(points):
        by_operator[operator].append(number)
    size = min(size, len(points))
    shares = {op: size * len(numbers) / len(points) for op, numbers in by_operator.items()}
    quota = {op: int(share) for op, share in shares.items()}
    for op in sorted(shares, key=lambda o: (quota[o] - shares[o], o))[: size - sum(quota.values())]:
        quota[op] += 1
    # An operator left out takes one from the operator with the most, while that keeps one.
    for op in sorted(by_operator, key=lambda o: (len(by_operator[o]), o)):
        richest = max(quota, key=lambda o: (quota[o], o))
        if quota[op] == 0 and quota[richest] > 1:
            quota[op], quota[richest] = 1, quota[richest] - 1
    chosen = []
    for op in sorted(by_operator):
        chosen += rng.sample(by_operator[op], quota[op])
    return sorted(chosen)


def mutant_timeout(clean_seconds: float) -> float:
    """A mutant may run three times as long as the clean run of its subset, and at least ten seconds
    more (a slower start on a loaded machine is not a kill)."""
    return max(3 * clean_seconds, clean_seconds + 10)


def run_file(relative: str, sample: int, seed: int, deadline: float,
             only: list[int] | None = None, tests: list[str] | None = None) -> tuple[list[Mutant], int]:
    """Run the module's sampled mutants; returns them and the module's number of mutation points."""
    path = os.path.join(ROOT, relative)
    with open(path, "rb") as file:
        original = file.read()
    source = original.decode("utf-8")
    tests = tests or list(TARGETS[relative].tests)
    points = _points(ast.parse(source))
    if not points or (only is None and sample == 0):
        print(f"{relative}: {len(points)} mutation points, none sampled", flush=True)
        return [], len(points)
    reprinted = ast.unparse(ast.parse(source)).splitlines()
    chosen = only if only is not None else stratified_sample(points, sample, seed, relative)
    results: list[Mutant] = []
    try:
        # The file as ast.unparse writes it must pass: a mutant differs from it in one place only.
        with open(path, "w", encoding="utf-8") as file:
            file.write(ast.unparse(ast.parse(source)))
        _clear_bytecode(path)
        started = time.perf_counter()
        baseline = run_tests(tests, timeout=900)
        baseline_seconds = time.perf_counter() - started
        if baseline != "survived":  # said, and the run goes on with the next module
            print(f"{relative}: NOT RUN: its tests fail ({baseline}) on the unmutated (re-printed) file: {tests}",
                  flush=True)
            return results, len(points)
        print(f"{relative}: {len(points)} mutation points, {len(chosen)} sampled; tests take {baseline_seconds:.1f}s",
              flush=True)
        for number in chosen:
            if time.perf_counter() > deadline:
                break
            text, line, operator = mutate(source, number)
            mutant = Mutant(relative, number, line, operator)
            mutant.mutated_line = _changed_line(reprinted, text.splitlines())
            with open(path, "w", encoding="utf-8") as file:
                file.write(text)
            _clear_bytecode(path)
            started = time.perf_counter()
            mutant.status = run_tests(tests, timeout=mutant_timeout(baseline_seconds))
            mutant.seconds = time.perf_counter() - started
            results.append(mutant)
            print(f"  {mutant.status:8} {relative}:{line} [{operator}, point {number}] {mutant.mutated_line}",
                  flush=True)
    finally:
        with open(path, "wb") as file:
            file.write(original)
        _clear_bytecode(path)
    with open(path, "rb") as file:
        assert file.read() == original, f"{relative} was not restored"
    return results, len(points)


def score_table(results: list[Mutant], points: dict[str, int]) -> list[str]:
    """Per package, then per module: points, mutants run, killed, timed out, survived, score."""
    rows: dict[str, Counter] = defaultdict(Counter)
    for relative, count in points.items():
        for key in (relative.split("/")[0], relative):
            rows[key]["points"] += count
            rows[key]["run"] += 0
    for mutant in results:
        for key in (mutant.path.split("/")[0], mutant.path):
            rows[key]["run"] += 1
            rows[key][mutant.status] += 1
    lines = [f"{'':34} {'points':>6} {'run':>4} {'killed':>6} {'timeout':>7} {'survived':>8} {'score':>6}"]
    for key in sorted(rows, key=lambda k: (k.split("/")[0], "/" in k, k)):
        c = rows[key]
        score = f"{100 * (c['killed'] + c['timeout']) / c['run']:.0f}%" if c["run"] else "-"
        name = key if "/" in key else f"{key}/ (package)"
        lines.append(f"{name:34} {c['points']:6} {c['run']:4} {c['killed']:6} {c['timeout']:7} {c['survived']:8} "
                     f"{score:>6}")
    return lines


def report(paths: list[str]) -> int:
    """The tables of saved results, merged in order (a later file's mutant replaces an earlier one's)."""
    points: dict[str, int] = {}
    merged: dict[tuple[str, int], Mutant] = {}
    for path in paths:
        try:
            with open(path, encoding="utf-8") as file:
                saved = json.load(file)
            points.update(saved["points"])
            for fields in saved["mutants"]:
                mutant = Mutant(**fields)
                merged[(mutant.path, mutant.number)] = mutant
        except (OSError, ValueError, KeyError, TypeError) as error:
            print(f"{path}: not a results file of bench/mutation.py --json: {error}", file=sys.stderr)
            return 2
    results = sorted(merged.values(), key=lambda m: (m.path, m.number))
    for line in score_table(results, points):
        print("  " + line)
    survivors = [m for m in results if m.status == "survived"]
    print(f"\nsurvivors ({len(survivors)}):")
    for mutant in survivors:
        print(f"  {mutant.path}:{mutant.line} [{mutant.operator}, point {mutant.number}] {mutant.mutated_line}")
    return 0


def _interrupted(signum, frame) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scale", type=float, default=1.0,
                        help="multiply every module's sample size (0.5: half the run; rounded, at least 1)")
    parser.add_argument("--budget", type=float, default=3000, help="seconds after which no mutant starts")
    parser.add_argument("--file", action="append", choices=sorted(TARGETS), help="only these modules")
    parser.add_argument("--json", help="write every mutant's result here")
    parser.add_argument("--point", action="append", metavar="FILE:N",
                        help="run only mutation point N of FILE (as the survivors list names them)")
    parser.add_argument("--report", nargs="+", metavar="JSON",
                        help="run nothing: print the tables of saved --json results, a later file's mutants "
                        "replacing an earlier one's of the same file and point (a re-run of the survivors)")
    parser.add_argument("--tests", nargs="+", help="pytest arguments to run instead of the module's subset "
                        "(to see whether a wider part of the suite kills a survivor)")
    args = parser.parse_args(argv)
    if args.scale <= 0:
        parser.error("--scale must be positive")
    if args.report:
        return report(args.report)
    # A SIGTERM (timeout, a closed terminal) must still run the `finally` that puts the file back.
    signal.signal(signal.SIGTERM, _interrupted)
    # Started in the background, a process inherits SIGINT ignored, and so would every test's child:
    # the tests that send Ctrl-C to a node (exit 130) would fail on every mutant. A handler of our own
    # is reset to the default in the children.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    only: dict[str, list[int]] = {}
    for point in args.point or []:
        relative, _, number = point.rpartition(":")
        if relative not in TARGETS or not number.isdigit():
            parser.error(f"--point {point!r}: expected FILE:N with FILE one of {', '.join(TARGETS)}")
        only.setdefault(relative, []).append(int(number))
    started = time.perf_counter()
    deadline = started + args.budget
    results: list[Mutant] = []
    points: dict[str, int] = {}
    for relative in (list(only) if only else args.file or list(TARGETS)):
        if time.perf_counter() > deadline:
            print(f"{relative}: not run (budget spent)")
            continue
        sample = TARGETS[relative].sample and max(1, round(TARGETS[relative].sample * args.scale))
        found, points[relative] = run_file(relative, sample, args.seed, deadline, only.get(relative), args.tests)
        results.extend(found)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"\n{len(results)} mutants in {time.perf_counter() - started:.0f}s of wall time, "
          f"{children.ru_utime + children.ru_stime:.0f}s of CPU time in the test runs")
    print("\nper package and per module (timeouts count as killed):")
    for line in score_table(results, points):
        print("  " + line)
    survivors = [m for m in results if m.status == "survived"]
    print(f"\nsurvivors ({len(survivors)}):")
    for mutant in survivors:
        print(f"  {mutant.path}:{mutant.line} [{mutant.operator}, point {mutant.number}] {mutant.mutated_line}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as file:
            json.dump({"seed": args.seed, "scale": args.scale, "points": points,
                       "mutants": [asdict(m) for m in results]}, file, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
