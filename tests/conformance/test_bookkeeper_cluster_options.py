"""The simulated BookKeeper cluster's keyword options reach its writer and recovery client
(bridge/simcluster/bookkeeper.py): what `hwm` and the tests use to run other ledger parameters."""

from __future__ import annotations

from hwm.bridge.simcluster import build_cluster
from hwm.model.state import Config
from hwm.properties.protocol import BOOKKEEPER


def test_ledger_options_given_to_the_cluster_override_the_protocols():
    config = Config(servers=3, max_generation=4, max_log=2, max_crashes=1)
    default = build_cluster(BOOKKEEPER, config)
    cluster = build_cluster(BOOKKEEPER, config, ack_quorum=3)
    assert default.writer.quorums.ack_quorum == 2  # a majority of the three bookies
    assert cluster.writer.quorums.ack_quorum == 3 and cluster.recovery.quorums.ack_quorum == 3
