"""A real cluster for tests: one local ZooKeeper and N ``twinlog serve --broker-id I
--zookeeper ...`` processes on loopback, as ``tests/system/test_cluster_replication.py``
runs them, for any test module to reuse. ``tests/system/conftest.py`` makes the two
fixtures of the usual shape (a module overrides ``cluster`` for other settings):

    @pytest.fixture(scope="session")
    def zookeeper(tmp_path_factory):
        with running_zookeeper(tmp_path_factory.mktemp("zookeeper")) as server:
            yield server

    @pytest.fixture()
    def cluster(tmp_path, zookeeper):
        with running_cluster(tmp_path, zookeeper) as opened:   # brokers 1, 2, 3
            yield opened

Each cluster gets a chroot of its own (``/twinlog-<random>``, at the top: a parent made
by one cluster is locked with its ZooKeeper credential, which the next one does not
have), so one ZooKeeper serves every test of the session that does not stop it.

Secure by default (``secure=True``, ``cluster_security``): every broker requires tokens,
checks the ACL file, authenticates the other brokers with mutual TLS on its inter-broker
listener (broker certificates from a throwaway CA) and locks its znodes with the
ZooKeeper credential, which the test's own session uses too. Every client the cluster
hands out (``remote``, ``create_replicated_topic``) carries the operator's token
(``cluster.token``; ``client_options()`` and ``client_arguments()`` for a test's own
clients; ``cli_arguments()`` for the ``twinlog`` commands). ``secure=False`` runs the
brokers with only the ``arguments`` given (a test bringing its own security flags). Test settings (CLUSTER.md §3.9): 4 s sessions, ZooKeeper ticks
of 500 ms, a follower lagging 6 s leaves the ISR, acks wait at most 10 s. On a failing
test each broker's log tail is printed. Every wait is ``wait_for(what, probe,
timeout_s)``, never a bare sleep. No tests here.

Thread rule: the test's thread (``partition_state`` may be called from any thread).
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
from cluster_security import OPERATOR, ClusterSecurity
from server_process import ServerProcess

from twinlog.engine.zookeeper.partition_state import PartitionState, read_partition_state
from twinlog.engine.zookeeper.session import ZooKeeperSession
from twinlog.rpc.cli.local_zookeeper import LocalZooKeeper
from twinlog.rpc.client import Admin
from twinlog.rpc.client.connection_options import ConnectionOptions
from twinlog.rpc.client.remote import RemoteBroker

SESSION_TIMEOUT_MS = 4000
TICK_TIME_MS = 500
BROKER_SETTINGS = ("replica_lag_time_max_ms=6000", "replica_ack_timeout_ms=10000")
WAIT_S = 30.0
POLL_S = 0.1
LOG_TAIL_CHARS = 6000

T = TypeVar("T")


def wait_for(
    what: str, probe: Callable[[], T | None], timeout_s: float = WAIT_S, poll_s: float = POLL_S
) -> T:
    """``probe()``'s first truthy answer, polled every ``poll_s``; AssertionError naming
    ``what`` after ``timeout_s``. (In-process clusters poll in milliseconds.)"""
    deadline = time.monotonic() + timeout_s
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(poll_s)


@contextmanager
def running_zookeeper(scratch_dir: Path) -> Iterator[LocalZooKeeper]:
    """A local ZooKeeper for the block; the test is skipped without java."""
    if shutil.which("java") is None:
        pytest.skip("no java on PATH: the cluster tests need Java 17")
    with LocalZooKeeper(scratch_dir, tick_time_ms=TICK_TIME_MS) as server:
        yield server


class LocalCluster:
    """Brokers ``broker_ids`` (processes not started yet) on a fresh chroot of ``zookeeper``."""

    def __init__(
        self,
        root: Path,
        zookeeper: LocalZooKeeper,
        broker_ids: Iterable[int] = (1, 2, 3),
        settings: Iterable[str] = BROKER_SETTINGS,
        arguments: Iterable[str] = (),
        *,
        secure: bool = True,
    ) -> None:
        """``arguments``: more ``twinlog serve`` flags for every broker. ``secure``: tokens,
        ACLs, broker certificates and the ZooKeeper credential (``cluster_security``)."""
        self.root = root
        self.connect = f"{zookeeper.connect_string}/twinlog-{uuid.uuid4().hex[:12]}"
        self.settings = list(settings)
        self.arguments = list(arguments)
        broker_ids = list(broker_ids)
        self.security = ClusterSecurity.write(root / "security", broker_ids) if secure else None
        self.brokers = {broker_id: self._process(broker_id) for broker_id in broker_ids}
        self.session: ZooKeeperSession | None = None

    # --- credentials -------------------------------------------------------------------

    def token_of(self, principal: str = OPERATOR) -> str | None:
        """``principal``'s token (``cluster_security.PRINCIPALS``); None when not secure."""
        return None if self.security is None else self.security.token(principal)

    @property
    def token(self) -> str | None:
        """The operator's token (may do everything); None when the cluster is not secure."""
        return self.token_of(OPERATOR)

    def client_options(self, request_timeout_ms: int = 20_000) -> ConnectionOptions:
        return ConnectionOptions(token=self.token, request_timeout_ms=request_timeout_ms)

    def client_arguments(self, principal: str = OPERATOR) -> dict[str, Any]:
        """Keyword arguments for a ``Producer``, ``Consumer`` or ``Admin`` of ``principal``."""
        token = self.token_of(principal)
        return {} if token is None else {"token": token}

    def cli_arguments(self) -> list[str]:
        """``--token ...`` for a ``twinlog`` command run against the cluster's brokers."""
        return [] if self.token is None else ["--token", self.token]

    def zookeeper_cli_arguments(self) -> list[str]:
        """``--zookeeper CONNECT [--zookeeper-auth-file FILE]``: a ``twinlog`` command
        reading the cluster's znodes."""
        found = ["--zookeeper", self.connect]
        if self.security is not None:
            found += ["--zookeeper-auth-file", str(self.security.zookeeper_auth_file)]
        return found

    def _process(self, broker_id: int) -> ServerProcess:
        arguments = [
            "--broker-id",
            str(broker_id),
            "--zookeeper",
            self.connect,
            "--zookeeper-session-timeout-ms",
            str(SESSION_TIMEOUT_MS),
        ]
        for setting in self.settings:
            arguments.extend(["--config", setting])
        if self.security is not None:
            arguments.extend(self.security.broker_arguments(broker_id))
        arguments.extend(self.arguments)
        return ServerProcess(self.root / f"b{broker_id}", *arguments)

    def start(self) -> LocalCluster:
        # Side by side (each imports for a second or two); each waited for once all run.
        for process in self.brokers.values():
            process.spawn()
        for process in self.brokers.values():
            process.wait_serving()
        self.session = ZooKeeperSession(
            self.connect,
            session_timeout_ms=SESSION_TIMEOUT_MS,
            credential=None if self.security is None else self.security.credential,
        )
        return self

    def running(self, broker_id: int) -> bool:
        process = self.brokers[broker_id].process
        return process is not None and process.poll() is None

    @property
    def bootstrap(self) -> str:
        """``h:p,h:p,...`` of the brokers running now."""
        return ",".join(
            process.address
            for broker_id, process in sorted(self.brokers.items())
            if self.running(broker_id)
        )

    def remote(self, broker_id: int, request_timeout_ms: int = 20_000) -> RemoteBroker:
        return RemoteBroker(
            self.brokers[broker_id].address, self.client_options(request_timeout_ms)
        )

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        assert self.session is not None, "start() first"
        return read_partition_state(self.session, topic, partition)

    def create_replicated_topic(
        self, topic: str, partitions: int, replicas: int = 3
    ) -> dict[int, PartitionState]:
        """Create ``topic`` (through the cluster's clients) with ``replicas`` replicas per
        partition; the partitions' states once every replica is in sync."""
        with Admin(self.bootstrap, **self.client_arguments()) as admin:
            admin.create_topic(topic, partitions, {"replication.factor": str(replicas)})
        return self.wait_for_full_isr(topic, partitions, replicas)

    def wait_for_full_isr(
        self, topic: str, partitions: int, replicas: int, timeout_s: float = WAIT_S
    ) -> dict[int, PartitionState]:
        """Every partition led and with ``replicas`` in-sync replicas; their states."""

        def probe() -> dict[int, PartitionState] | None:
            states = {p: self.partition_state(topic, p) for p in range(partitions)}
            if all(
                s is not None and s.leader > 0 and len(s.isr) == replicas for s in states.values()
            ):
                return {p: s for p, s in states.items() if s is not None}
            return None

        return wait_for(
            f"{topic}: {partitions} partitions with {replicas} in sync", probe, timeout_s
        )

    def wait_for_new_leader(
        self, topic: str, partition: int, old: PartitionState, timeout_s: float = WAIT_S
    ) -> PartitionState:
        def probe() -> PartitionState | None:
            state = self.partition_state(topic, partition)
            if state is not None and state.leader not in (-1, old.leader):
                return state
            return None

        return wait_for(f"{topic}-{partition}: a leader other than {old.leader}", probe, timeout_s)

    def kill(self, broker_id: int) -> None:
        """SIGKILL: a crash (F1)."""
        self.brokers[broker_id].kill()

    def print_logs(self) -> None:
        for broker_id, process in sorted(self.brokers.items()):
            print(f"--- broker {broker_id} ---\n{process.log()[-LOG_TAIL_CHARS:]}")

    def close(self) -> None:
        for process in self.brokers.values():
            process.kill()
        if self.session is not None:
            self.session.close()


@contextmanager
def running_cluster(
    root: Path,
    zookeeper: LocalZooKeeper,
    broker_ids: Iterable[int] = (1, 2, 3),
    settings: Iterable[str] = BROKER_SETTINGS,
    arguments: Iterable[str] = (),
    *,
    secure: bool = True,
) -> Iterator[LocalCluster]:
    """A started cluster for the block; its brokers' logs printed if the block fails."""
    cluster = LocalCluster(root, zookeeper, broker_ids, settings, arguments, secure=secure)
    try:
        yield cluster.start()
    except BaseException:
        cluster.print_logs()
        raise
    finally:
        cluster.close()
