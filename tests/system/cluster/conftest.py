"""The fault cases of CLUSTER.md §4.4 against real processes (docs/testing-cluster.md).

One ZooKeeper and one three-broker ``FaultCluster`` serve every test of this folder
(starting them costs seconds that two cores cannot spare per test). Each test gets
the cluster healed (every link flowing, every broker running and registered) and a
topic of its own, and leaves whatever it broke for the next test's heal. A failing
test prints the brokers' logs.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator

import pytest
from cluster_faults import FaultCluster

from twinlog.rpc.cli.local_zookeeper import LocalZooKeeper

TICK_TIME_MS = 500  # sessions of 1..10 s; the tests use 4 s


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalZooKeeper]:
    if shutil.which("java") is None:
        pytest.skip("no java on PATH: the cluster tests need Java 17")
    with LocalZooKeeper(tmp_path_factory.mktemp("zookeeper"), tick_time_ms=TICK_TIME_MS) as server:
        yield server


@pytest.fixture(scope="session")
def shared_cluster(
    tmp_path_factory: pytest.TempPathFactory, zookeeper: LocalZooKeeper
) -> Iterator[FaultCluster]:
    cluster = FaultCluster(
        tmp_path_factory.mktemp("cluster"), zookeeper.connect_string, uuid.uuid4().hex[:12]
    )
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report = yield
    if report.when == "call":
        item.stash[FAILED] = report.failed
    return report


FAILED = pytest.StashKey[bool]()


@pytest.fixture()
def cluster(shared_cluster: FaultCluster, request: pytest.FixtureRequest) -> Iterator[FaultCluster]:
    """The shared cluster, healed."""
    shared_cluster.heal()
    yield shared_cluster
    if request.node.stash.get(FAILED, False):
        print(shared_cluster.dump_logs())


@pytest.fixture()
def topic(request: pytest.FixtureRequest) -> str:
    """A topic name of this test's own."""
    case = request.node.name.removeprefix("test_").split("_")[0]  # "f11"
    return f"{case}-{uuid.uuid4().hex[:8]}"
