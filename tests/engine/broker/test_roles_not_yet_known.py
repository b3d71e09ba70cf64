"""A cluster broker served before it has been told its roles (restarted at once, waiting out
its old ZooKeeper session) answers "loading, retry here" for a coordinator it may yet be
told to lead, not "not the coordinator": ZooKeeper may still name it, and a client told
NotCoordinatorError would look for the coordinator elsewhere and come back to it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from replication_support import Cluster

from twinlog.engine.base.errors import CoordinatorLoadInProgressError, NotCoordinatorError


@pytest.fixture()
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    opened = Cluster(tmp_path, replica_ack_timeout_ms=2000, replica_lag_time_max_ms=60_000)
    yield opened
    opened.close()


def test_until_its_roles_are_known_a_broker_says_loading_not_not_the_coordinator(
    cluster: Cluster,
) -> None:
    cluster.use_coordinator(1)  # broker 1 leads __txn_journal-0; broker 2 follows it
    follower = cluster.brokers[2]
    follower.roles_known.clear()  # as the server does before its doors open
    with pytest.raises(CoordinatorLoadInProgressError, match="has not yet been told"):
        follower.coordinator_manager.at(0)
    with pytest.raises(CoordinatorLoadInProgressError, match="has not yet been told"):
        follower.group_coordinators.coordinator_of("some-group")
    follower.roles_known.set()  # its cluster member's first full read
    with pytest.raises(NotCoordinatorError):
        follower.coordinator_manager.at(0)
    with pytest.raises(NotCoordinatorError):
        follower.group_coordinators.coordinator_of("some-group")
    assert cluster.brokers[1].coordinator_manager.at(0) is not None
