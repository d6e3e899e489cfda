"""Validating a directory of recorded runs, in this process or in parallel on Spark, into one table:
per run its verdict and first bad event; over all runs the model coverage (checker/coverage.py).

Both engines run the same function on each run (`validate_one`: text in, verdict row and
coverage fingerprints out), with the validator plain `hwm validate` chooses for the protocol
(`checker/recorded.py` `recorded_run_validator`: a Kafka recording is judged with the broker's finer
steps, a raft recording with the acknowledgement deferred), so a run's verdict is the same in the
table as without it; Spark maps it over the runs and the driver joins the results with the
reachable state space, so the two engines give the same table.
"""

from __future__ import annotations

from hwm.checker.coverage import CoverageTable, Reachable, RunCoverage, reachable, table
from hwm.checker.recorded import recorded_run_validator
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.properties.events import parse_lines
from hwm.properties.protocol import Protocol, resolve


def validate_one(name: str, text: str, protocol_spec, bounds: dict, depth: int):
    """(name, verdict row, state fingerprints, transition fingerprints) of one run's text. `protocol_spec`:
    a spec, or the protocol it resolves to (what Spark's executors get: a variant's pickles by its spec
    and loads there from the copy `ship_variant` sent)."""
    protocol = protocol_spec if isinstance(protocol_spec, Protocol) else resolve(protocol_spec)[1]
    header, events = parse_lines(text.splitlines(), source=name)
    config = Config(**bounds)
    coverage = RunCoverage(build_model(protocol, config), config)
    verdict = recorded_run_validator(protocol, header, depth=depth, coverage=coverage).validate(events)
    row = {"valid": verdict.valid, "events": verdict.events}
    d = verdict.discrepancy
    if d is not None:
        row.update(event=d.number, line=d.event.line if d.event is not None else None, reason=d.reason,
                   properties=sorted(d.properties))
    return name, row, coverage.states, coverage.transitions


def coverage_table(runs: list[tuple[str, str]], protocol_spec, bounds: dict, *, depth: int = 2,
                   engine: str = "local", spark=None, space: Reachable | None = None) -> CoverageTable:
    """The table of `runs` ((name, hwm-events/1 text) each) at `bounds` (a Config mapping)."""
    if space is None:
        space = reachable(resolve(protocol_spec)[1], Config(**bounds))
    if engine == "local":
        results = [validate_one(name, text, protocol_spec, bounds, depth) for name, text in runs]
    elif engine == "spark":
        results = _on_spark(spark, runs, protocol_spec, bounds, depth)
    else:
        raise ValueError(f"engine is local or spark, not {engine!r}")
    return table(results, space)


def _on_spark(spark, runs, protocol_spec, bounds, depth):
    from hwm.checker.spark_session import ship_packages, ship_variant, variant_failure  # PySpark: only when asked for

    ship_packages(spark)
    protocol = resolve(protocol_spec)[1]  # resolved here: an executor may not see a variant's file
    ship_variant(spark, protocol)
    sc = spark.sparkContext
    slices = max(1, min(len(runs), sc.defaultParallelism))  # one Python worker per core: few imports

    def one(item):
        from hwm.checker.validate_spark import validate_one as run_one  # in the executor, from the shipped zip
        return run_one(item[0], item[1], protocol, bounds, depth)

    # Fingerprints leave the executors as lists (sets of 64-bit ints pickle as they are).
    try:
        rows = sc.parallelize(runs, slices).map(one).map(lambda r: (r[0], r[1], list(r[2]), list(r[3]))).collect()
    except Exception as e:  # noqa: BLE001 - a variant's error on an executor reaches here wrapped by Spark
        own = variant_failure(e)
        if own is None:
            raise
        raise own from None
    return [(name, row, set(states), {tuple(t) for t in transitions}) for name, row, states, transitions in rows]
