"""Whole-system tests: real processes SIGKILLed at random and at every failpoint (the fault
harness), damaged and full disks, zombies, read-process-write under kills, load."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_support import LocalCluster, running_cluster, running_zookeeper

from twinlog.rpc.cli.local_zookeeper import LocalZooKeeper


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalZooKeeper]:
    """One local ZooKeeper for every module here (each cluster takes a chroot of its own,
    and no test here stops, pauses or cuts this ZooKeeper: those that do, in
    tests/system/cluster, have their own)."""
    with running_zookeeper(tmp_path_factory.mktemp("zookeeper")) as server:
        yield server


@pytest.fixture()
def cluster(tmp_path: Path, zookeeper: LocalZooKeeper) -> Iterator[LocalCluster]:
    """Brokers 1, 2 and 3 with the test settings; a module needing others overrides it."""
    with running_cluster(tmp_path, zookeeper) as opened:
        yield opened
