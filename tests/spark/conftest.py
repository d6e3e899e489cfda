"""One SparkSession for the whole test run: a JVM takes seconds to start."""

import pytest

from model.spark_engine import SparkUnavailable, get_spark

# Small on purpose: the machine running the suite is shared and has 2 cores.
TEST_MASTER = "local[2]"
TEST_CONF = {"spark.driver.memory": "1g", "spark.default.parallelism": "2"}


@pytest.fixture(scope="session")
def spark():
    try:
        session = get_spark(TEST_MASTER, conf=TEST_CONF)
    except SparkUnavailable as e:
        pytest.skip(f"Spark unavailable: {e}")
    yield session
    session.stop()
