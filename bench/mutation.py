"""A mutation score for impl/ and bridge/: small semantic mutants of one file at a time, each run
against the tests that cover that file; a mutant the tests still pass *survives*.

    python bench/mutation.py [--per-file 8] [--budget 900] [--seed 0] [--file impl/wal.py ...]
                             [--json results.json] [--point impl/wal.py:123 ...] [--tests PYTEST-ARGS...]

For each target file (TARGETS: the file and its test subset) the runner lists every mutation point,
samples `--per-file` of them (seeded), and for each one writes the mutated source over the file,
runs the subset (`python -m pytest -x -q -n 0 -p no:cacheprovider ...`, bytecode caching off) and
puts the original bytes back (in a `finally`, and the file is checked against them at the end). It
stops starting mutants once `--budget` seconds have passed. The score per package is killed / run;
survivors are printed as file:line, operator, and the mutated line, to be killed by a new test or
argued equivalent (docs/mutation.md).

Operators (one change per mutant): a comparison flipped to its neighbour or negation (`<` `<=`,
`==` `!=`, `in` `not in`, `is` `is not`), `and`/`or` swapped, a `not` dropped, `+`/`-` swapped, an
integer constant n made n + 1, `True`/`False` swapped, and a statement that only calls something
(`self._fs.fsync(fd)`, `link.send(m)`) deleted, the "skipped step" that crash bugs are made of.

Why a runner of our own: mutmut 3 imports its mutants under module names derived from the file's
path, and this project installs `impl/wal.py` as `hwm.impl.wal` (a package-dir mapping), so its
trampolines would never be imported; cosmic-ray mutates in place like this runner, but runs every
mutant of a session with one test command and has no sampling or time budget, which a loaded
two-core machine needs (a whole-file session of impl/core.py alone is hundreds of mutants).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# file -> the tests that cover it, fast enough to run once per mutant (no -m deep, no long searches)
TARGETS: dict[str, list[str]] = {
    "impl/wal.py": ["tests/impl/test_wal.py", "-k", "not crash_recovery", "tests/sim/test_reordering_disk.py"],
    "impl/storage.py": ["tests/impl/test_storage.py", "tests/impl/test_vote_durability.py"],
    "impl/codec.py": ["tests/impl/test_codec.py"],
    "impl/fs.py": ["tests/impl/test_fs_seam.py", "tests/impl/test_storage.py"],
    "impl/controller.py": ["tests/impl/test_controller_durability.py", "tests/sim/test_dst_kafka.py"],
    "impl/zab.py": ["tests/impl/test_zab.py", "tests/sim/test_dst_zab.py", "-k", "not derandomized"],
    "bridge/dst/disk.py": ["tests/sim/test_simdisk.py", "tests/sim/test_reordering_disk.py"],
    "bridge/dst/net.py": ["tests/sim/test_simnet.py"],
    "bridge/dst/kafka.py": ["tests/sim/test_dst_kafka.py"],
    "bridge/dst/ordering.py": ["tests/sim/test_reordering_disk.py"],
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


def _points(tree: ast.AST) -> list[tuple[ast.AST, str]]:
    """Every (node, operator) this runner can mutate, in a fixed walk order."""
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
        elif isinstance(node, ast.Constant) and type(node.value) is bool:
            points.append((node, "True/False"))
        elif isinstance(node, ast.Expr) and isinstance(node.value, (ast.Call, ast.Await)):
            points.append((node, "delete call"))
    return points


class _Apply(ast.NodeTransformer):
    def __init__(self, target: ast.AST, operator: str):
        self.target, self.operator = target, operator

    def visit(self, node):
        if node is not self.target:
            return self.generic_visit(node)
        op = self.operator
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
        elif op == "True/False":
            node.value = not node.value
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


def run_tests(tests: list[str], timeout: float) -> str:
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", HYPOTHESIS_PROFILE="ci")
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-n", "0", "-p", "no:cacheprovider", *tests]
    try:
        result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout"
    return "survived" if result.returncode == 0 else "killed"


def run_file(relative: str, per_file: int, rng: random.Random, deadline: float,
             only: list[int] | None = None, tests: list[str] | None = None) -> list[Mutant]:
    path = os.path.join(ROOT, relative)
    with open(path, "rb") as file:
        original = file.read()
    source = original.decode("utf-8")
    tests = tests or TARGETS[relative]
    points = _points(ast.parse(source))
    reprinted = ast.unparse(ast.parse(source)).splitlines()
    chosen = only if only is not None else sorted(rng.sample(range(len(points)), min(per_file, len(points))))
    results: list[Mutant] = []
    try:
        # The file as ast.unparse writes it must pass: a mutant differs from it in one place only.
        with open(path, "w", encoding="utf-8") as file:
            file.write(ast.unparse(ast.parse(source)))
        _clear_bytecode(path)
        started = time.perf_counter()
        baseline = run_tests(tests, timeout=600)
        baseline_seconds = time.perf_counter() - started
        if baseline != "survived":
            raise SystemExit(f"{relative}: its tests fail on the unmutated (re-printed) file: {tests}")
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
            mutant.status = run_tests(tests, timeout=3 * baseline_seconds + 30)
            mutant.seconds = time.perf_counter() - started
            results.append(mutant)
            print(f"  {mutant.status:8} {relative}:{line} {operator}: {mutant.mutated_line}", flush=True)
    finally:
        with open(path, "wb") as file:
            file.write(original)
        _clear_bytecode(path)
    with open(path, "rb") as file:
        assert file.read() == original, f"{relative} was not restored"
    return results


def _interrupted(signum, frame) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-file", type=int, default=8, help="mutants sampled per file")
    parser.add_argument("--budget", type=float, default=900, help="seconds after which no mutant starts")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--file", action="append", choices=sorted(TARGETS), help="only these files")
    parser.add_argument("--json", help="write every mutant's result here")
    parser.add_argument("--point", action="append", metavar="FILE:N",
                        help="run only mutation point N of FILE (as the survivors list names them)")
    parser.add_argument("--tests", nargs="+", help="pytest arguments to run instead of the file's subset "
                        "(to see whether a wider part of the suite kills a survivor)")
    args = parser.parse_args(argv)
    # A SIGTERM (timeout, a closed terminal) must still run the `finally` that puts the file back.
    signal.signal(signal.SIGTERM, _interrupted)
    only: dict[str, list[int]] = {}
    for point in args.point or []:
        relative, _, number = point.rpartition(":")
        if relative not in TARGETS or not number.isdigit():
            parser.error(f"--point {point!r}: expected FILE:N with FILE one of {', '.join(TARGETS)}")
        only.setdefault(relative, []).append(int(number))
    rng = random.Random(args.seed)
    deadline = time.perf_counter() + args.budget
    results: list[Mutant] = []
    for relative in (list(only) if only else args.file or list(TARGETS)):
        if time.perf_counter() > deadline:
            print(f"{relative}: not run (budget spent)")
            continue
        results.extend(run_file(relative, args.per_file, rng, deadline, only.get(relative), args.tests))
    packages: dict[str, Counter] = {}
    for mutant in results:
        package = "bridge" if mutant.path.startswith("bridge/") else "impl"
        packages.setdefault(package, Counter())[mutant.status] += 1
    print("\nscore per package (killed, timeouts counted as killed / run):")
    for package, counts in sorted(packages.items()):
        run = sum(counts.values())
        killed = counts["killed"] + counts["timeout"]
        print(f"  {package}: {killed}/{run} = {100 * killed / run:.0f}% ({dict(counts)})")
    survivors = [m for m in results if m.status == "survived"]
    print(f"\nsurvivors ({len(survivors)}):")
    for mutant in survivors:
        print(f"  {mutant.path}:{mutant.line} [{mutant.operator}, point {mutant.number}] {mutant.mutated_line}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as file:
            json.dump([asdict(m) for m in results], file, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
