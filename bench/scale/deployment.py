"""Where the producers commit: one ``twinlog serve``, or three brokers on a ZooKeeper.

Each is a context manager that starts it, creates the topic (``TOPIC``, its partitions;
on the cluster replication factor 3, every partition with a full ISR, and every
transaction coordinator answering), yields a ``Deployment`` (the bootstrap list the
producers use and the server processes whose CPU is counted), and kills every process
it started however the block ends. Both are started as ``bench.cluster`` starts them:
``ServerProcess`` (its own process group, a bounded start) and ``BenchCluster`` with
its default settings (acks=all, min ISR 2) and a 4 s ZooKeeper session timeout.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench.cluster.cluster import REPLICATION_FACTOR, STATE_TIMEOUT_S, BenchCluster
from bench.cluster.coordinator_failover import wait_coordinators_answer
from bench.cluster.server_process import ServerProcess
from bench.scale.settings import TOPIC, ScaleSettings
from twinlog.engine.broker.config import BrokerConfig
from twinlog.rpc.cli.local_zookeeper import LocalZooKeeper
from twinlog.rpc.client.connection_options import ConnectionOptions
from twinlog.rpc.client.remote import RemoteBroker

Announce = Callable[[str], None]


@dataclass(frozen=True)
class Deployment:
    key: str  # its name in the JSON report
    name: str  # in the table
    bootstrap: str
    pids: tuple[int, ...]  # the servers: their CPU and context switches are counted
    coordinators: int  # transaction coordinators (``__txn_journal`` partitions)


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
    root: Path, settings: ScaleSettings, server_config: Sequence[str], announce: Announce
) -> Iterator[Deployment]:
    announce("starting twinlog serve")
    server = ServerProcess("one-node", root / "one-node", _config_arguments(server_config))
    try:
        server.start()
        assert server.process is not None
        with RemoteBroker(server.address, ConnectionOptions()) as admin:
            admin.create_topic(TOPIC, settings.partitions)
        announce(f"serving on {server.address} (pid {server.process.pid})")
        yield Deployment(
            "one_node",
            "one node",
            server.address,
            (server.process.pid,),
            _journal_partitions(server_config),
        )
    finally:
        server.kill_group()


@contextmanager
def three_brokers(
    root: Path, settings: ScaleSettings, server_config: Sequence[str], announce: Announce
) -> Iterator[Deployment]:
    announce("starting ZooKeeper")
    with LocalZooKeeper(root / "zookeeper", tick_time_ms=settings.zookeeper_tick_ms) as zookeeper:
        connect = f"{zookeeper.connect_string}/bench/{uuid.uuid4().hex[:8]}"
        cluster = BenchCluster(
            root / "cluster", connect, settings.session_timeout_ms, list(server_config)
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
            announce(f"serving on {','.join(addresses)} (pids {' '.join(map(str, pids))})")
            yield Deployment(
                "rf3",
                f"three brokers, RF {REPLICATION_FACTOR}",
                ",".join(addresses),
                pids,
                cluster.journal_partitions(),
            )
        finally:
            cluster.close()
