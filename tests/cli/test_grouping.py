"""The suite's xdist groups (tests/conftest.py) take effect: a test's node id carries its group.

pytest-xdist's loadgroup scheduler reads the group from that suffix; when a pytest release stores
node ids elsewhere the suffix is silently lost and every costly fixture (the Spark session, the
browser, the Numba compile) starts once per worker again.
"""

import os

import pytest


def test_a_test_runs_in_its_group(request):
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        pytest.skip("runs under pytest-xdist only (-n 0 has no groups)")
    assert request.node.nodeid.endswith("@tests/cli/test_grouping.py"), request.node.nodeid
