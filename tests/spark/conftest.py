"""One SparkSession for the whole test run: a JVM takes seconds to start."""

import pytest

from hwm.checker.spark_session import SparkUnavailable, get_spark

# Small on purpose: the machine running the suite is shared and has 2 cores. The tests' jobs are small
# and the JVM lives for a minute: its JIT's optimising tier and parallel collector cost more than they
# give (measured on tests/spark: the JVM's CPU 36 s with them, 17 s with C1 only and the serial
# collector; 61 s and 45 s of wall time).
TEST_MASTER = "local[2]"
TEST_CONF = {"spark.driver.memory": "1g", "spark.default.parallelism": "2",
             "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}


@pytest.fixture(scope="session")
def spark():
    try:
        session = get_spark(TEST_MASTER, conf=TEST_CONF)
    except SparkUnavailable as e:
        pytest.skip(f"Spark unavailable: {e}")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def compiled():
    """The kernels compiled (or loaded) once in the driver, which writes them to hwm's cache (or, on
    the JIT path, Numba's): on a fresh clone every executor would otherwise compile them itself, at once."""
    from hwm.model.registry import build_model
    from hwm.checker.fast import FastBackend
    from hwm.model.state import Config
    from hwm.properties.protocol import PRESETS

    for network in ("rpc", "async"):
        FastBackend(build_model(PRESETS["raft"].protocol, Config(servers=2, max_generation=1, max_log=1,
                                                                 max_crashes=0, network=network)), True)
