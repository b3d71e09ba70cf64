"""The fault cases of CLUSTER.md §4.4 against real processes (docs/testing-cluster.md).

One ZooKeeper and one three-broker ``FaultCluster`` serve every test of this folder
(starting them costs seconds that two cores cannot spare per test). Each test gets
the cluster healed (every link flowing, every broker running and registered) and a
topic of its own, and leaves whatever it broke for the next test's heal. A failing
test prints the brokers' logs.

The cluster is closed after this folder's last test in the run, not at the end of the
session: its ZooKeeper client and fault proxies are threads of the test process, and
kazoo's reconnect loop draws from the ``random`` module's shared state, which
Hypothesis (in the tests that may run after these, in another order) takes as its own
and refuses to see changed.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

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


HERE = Path(__file__).parent
LAST_TEST = pytest.StashKey[str]()  # node id of this folder's last test in the run's order
OPEN_CLUSTERS: list[FaultCluster] = []  # the shared cluster while it is open


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mine = [item for item in items if HERE in Path(item.path).parents]
    if mine:
        config.stash[LAST_TEST] = mine[-1].nodeid


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    result = yield
    if item.nodeid == item.config.stash.get(LAST_TEST, None):
        _close_shared_cluster()
    return result


def _close_shared_cluster() -> None:
    while OPEN_CLUSTERS:
        OPEN_CLUSTERS.pop().close()


@pytest.fixture(scope="session")
def shared_cluster(
    tmp_path_factory: pytest.TempPathFactory, zookeeper: LocalZooKeeper
) -> Iterator[FaultCluster]:
    cluster = FaultCluster(
        tmp_path_factory.mktemp("cluster"), zookeeper.connect_string, uuid.uuid4().hex[:12]
    )
    OPEN_CLUSTERS.append(cluster)
    try:
        cluster.start()
        yield cluster
    finally:
        _close_shared_cluster()  # unless this folder's last test closed it already


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
