"""Where the producers commit: one ``twinlog serve``, or three brokers on a ZooKeeper.

Each is a context manager that starts it, creates the topic (``TOPIC``, its partitions;
on the cluster replication factor 3, every partition with a full ISR, and every
transaction coordinator answering), yields a ``Deployment`` (the bootstrap list the
producers use and the server processes whose CPU is counted), and kills every process
it started however the block ends. Both are started as ``bench.cluster`` starts them:
``ServerProcess`` (its own process group, a bounded start) and ``BenchCluster`` with
its default settings (acks=all, min ISR 2) and a 4 s ZooKeeper session timeout, plus
the flags of the run's security mode (``bench.scale.security``): the benchmark's own
clients (the topic's creation, the coordinator probes, the ZooKeeper session that
watches the brokers) then present the ``ops`` token, trust the client port's CA and
authenticate to ZooKeeper as the brokers do.
"""

from __future__ import annotations

import functools
import re
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench.cluster.cluster import (
    ADMIN_TIMEOUT_MS,
    REPLICATION_FACTOR,
    STATE_TIMEOUT_S,
    BenchCluster,
)
from bench.cluster.coordinator_failover import (
    NOT_LOADED_ERRORS,
    PROBE_REQUEST_TIMEOUT_MS,
    unknown_producer_id,
)
from bench.cluster.server_process import ServerProcess
from bench.cluster.waiting import wait_for
from bench.scale.security import Security
from bench.scale.settings import TOPIC, ScaleSettings
from twinlog.engine.base.errors import TwinlogError
from twinlog.engine.broker.config import BrokerConfig
from twinlog.engine.broker.internal_topics import TXN_JOURNAL_TOPIC
from twinlog.engine.zookeeper.session import ZooKeeperSession
from twinlog.rpc.cli.local_zookeeper import LocalZooKeeper
from twinlog.rpc.client.connection_options import ConnectionOptions
from twinlog.rpc.client.remote import RemoteBroker

Announce = Callable[[str], None]
# The start-up line of ``twinlog serve``: "serving on ADDRESS (SECURITY; SETTINGS); ..."
SERVING_SECURITY = re.compile(r"serving on \S+ \(([^;]*);")


@dataclass(frozen=True)
class Deployment:
    key: str  # its name in the JSON report
    name: str  # in the table
    bootstrap: str
    pids: tuple[int, ...]  # the servers: their CPU and context switches are counted
    coordinators: int  # transaction coordinators (``__txn_journal`` partitions)
    security: Security
    servers_said: tuple[str, ...]  # each server's security, as its start-up line says it

    def options(self, request_timeout_ms: int = ADMIN_TIMEOUT_MS) -> ConnectionOptions:
        """The benchmark's own admin client of these servers."""
        return self.security.options(request_timeout_ms)


def security_said(server: ServerProcess) -> str:
    """What ``server`` says of its client port's security at start-up ("TLS, 2 bearer
    tokens, 4 ACL grants"), from its log; "?" if the line is not there."""
    found = SERVING_SECURITY.findall(server.log_path.read_text(errors="replace"))
    return found[-1] if found else "?"


def _config_arguments(server_config: Sequence[str]) -> list[str]:
    return [f"--config={pair}" for pair in server_config]


def _journal_partitions(server_config: Sequence[str]) -> int:
    """A new one-node server's coordinators: its config's, else the broker's default."""
    for pair in server_config:
        key, _, value = pair.partition("=")
        if key.strip() == "journal_partitions":
            return int(value)
    return BrokerConfig().journal_partitions


@contextmanager
def one_node(
    root: Path,
    settings: ScaleSettings,
    server_config: Sequence[str],
    security: Security,
    announce: Announce,
) -> Iterator[Deployment]:
    announce("starting twinlog serve")
    server = ServerProcess(
        "one-node",
        root / "one-node",
        [*_config_arguments(server_config), *security.server_arguments()],
    )
    try:
        server.start()
        assert server.process is not None
        with RemoteBroker(server.address, security.options(ADMIN_TIMEOUT_MS)) as admin:
            admin.create_topic(TOPIC, settings.partitions)
        said = security_said(server)
        announce(f"serving on {server.address} ({said}; pid {server.process.pid})")
        yield Deployment(
            "one_node",
            "one node",
            server.address,
            (server.process.pid,),
            _journal_partitions(server_config),
            security,
            (said,),
        )
    finally:
        server.kill_group()


class SecuredBenchCluster(BenchCluster):
    """``BenchCluster`` with the security mode's flags on every broker, its admin clients
    and its ZooKeeper session presenting the mode's credentials (``off``: none, so it is
    ``BenchCluster`` as it is)."""

    def __init__(
        self,
        root: Path,
        zookeeper_connect: str,
        session_timeout_ms: int,
        server_config: Sequence[str],
        security: Security,
    ) -> None:
        self.security = security  # before BenchCluster's: its __init__ calls _arguments
        super().__init__(root, zookeeper_connect, session_timeout_ms, server_config)

    def _arguments(self, broker_id: int) -> list[str]:
        return [*super()._arguments(broker_id), *self.security.broker_arguments(broker_id)]

    def start(self) -> SecuredBenchCluster:
        """As ``BenchCluster.start``, its session authenticated with the brokers' ZooKeeper
        credential (their znodes are readable with it only)."""
        for process in self.brokers.values():
            process.start()
        self.session = ZooKeeperSession(
            self.connect,
            session_timeout_ms=self.session_timeout_ms,
            credential=self.security.zookeeper_credential,
        )
        wait_for("three live brokers", lambda: len(self.live_addresses()) == 3, STATE_TIMEOUT_S)
        return self

    def admin(self, broker_id: int | None = None) -> RemoteBroker:
        if broker_id is None:
            broker_id = next(i for i, process in self.brokers.items() if process.running)
        return RemoteBroker(
            self.brokers[broker_id].address, self.security.options(ADMIN_TIMEOUT_MS)
        )


def wait_coordinators_answer(cluster: SecuredBenchCluster, timeout_s: float) -> int:
    """Until every coordinator answers at its journal partition's leader; their count.
    ``bench.cluster``'s wait, its probe (a begin for a producer id nobody has) sent
    with the ``ops`` credentials: without them a secured broker's refusal would read
    as an answer."""
    clients: dict[str, RemoteBroker] = {}
    options = cluster.security.options(PROBE_REQUEST_TIMEOUT_MS)

    def answers(journal_partition: int) -> bool:
        state = cluster.state(TXN_JOURNAL_TOPIC, journal_partition)
        if state is None or state.leader <= 0:
            return False
        address = cluster.brokers[state.leader].address
        client = clients.get(address)
        if client is None:
            client = clients[address] = RemoteBroker(address, options)
        try:
            client.begin_transaction(unknown_producer_id(journal_partition), 0)
        except NOT_LOADED_ERRORS:
            return False
        except TwinlogError:
            return True  # UnknownProducerIdError: the coordinator is loaded and answers
        return True

    count = cluster.journal_partitions()
    try:
        for journal_partition in range(count):
            cluster.wait_full_isr(TXN_JOURNAL_TOPIC, journal_partition)
            wait_for(
                f"transaction coordinator {journal_partition} loaded",
                functools.partial(answers, journal_partition),
                timeout_s,
            )
    finally:
        for client in clients.values():
            client.close()
    return count


@contextmanager
def three_brokers(
    root: Path,
    settings: ScaleSettings,
    server_config: Sequence[str],
    security: Security,
    announce: Announce,
) -> Iterator[Deployment]:
    announce("starting ZooKeeper")
    with LocalZooKeeper(root / "zookeeper", tick_time_ms=settings.zookeeper_tick_ms) as zookeeper:
        connect = f"{zookeeper.connect_string}/bench/{uuid.uuid4().hex[:8]}"
        cluster = SecuredBenchCluster(
            root / "cluster", connect, settings.session_timeout_ms, server_config, security
        )
        try:
            announce("starting three brokers")
            cluster.start()
            cluster.create_topic(TOPIC, settings.partitions)
            announce("waiting for every transaction coordinator")
            wait_coordinators_answer(cluster, STATE_TIMEOUT_S)
            processes = [broker.process for broker in cluster.brokers.values()]
            pids = tuple(process.pid for process in processes if process is not None)
            addresses = [broker.address for broker in cluster.brokers.values()]
            said = tuple(security_said(broker) for broker in cluster.brokers.values())
            announce(
                f"serving on {','.join(addresses)} ({' | '.join(sorted(set(said)))}; "
                f"pids {' '.join(map(str, pids))})"
            )
            yield Deployment(
                "rf3",
                f"three brokers, RF {REPLICATION_FACTOR}",
                ",".join(addresses),
                pids,
                cluster.journal_partitions(),
                security,
                said,
            )
        finally:
            cluster.close()
