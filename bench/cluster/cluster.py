"""Three ``twinlog serve --broker-id N --zookeeper ...`` processes on loopback, and the
benchmark's own ZooKeeper session to watch them (who leads, who is in sync).

The brokers run with their default settings except the session timeout (the tests'
4 s) and any ``--server-config`` given; each has its own data directory under ``root``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from kazoo.exceptions import NoNodeError

from bench.cluster.server_process import ServerProcess
from bench.cluster.waiting import wait_for
from twinlog.engine.zookeeper import znodes
from twinlog.engine.zookeeper.broker_registration import live_brokers
from twinlog.engine.zookeeper.partition_state import (
    PartitionState,
    read_partition_state,
    read_topic_partition_states,
)
from twinlog.engine.zookeeper.session import ZooKeeperSession
from twinlog.rpc.client.connection_options import ConnectionOptions
from twinlog.rpc.client.remote import RemoteBroker

BROKER_IDS = (1, 2, 3)
REPLICATION_FACTOR = 3
ADMIN_TIMEOUT_MS = 30_000
STATE_TIMEOUT_S = 60.0  # a new topic's leaders, a restarted broker back in the ISR


class BenchCluster:
    def __init__(
        self,
        root: Path,
        zookeeper_connect: str,
        session_timeout_ms: int,
        server_config: Sequence[str] = (),
    ) -> None:
        self.root = root
        self.connect = zookeeper_connect
        self.session_timeout_ms = session_timeout_ms
        self.server_config = list(server_config)
        self.brokers = {
            broker_id: ServerProcess(
                f"broker-{broker_id}", root / f"b{broker_id}", self._arguments(broker_id)
            )
            for broker_id in BROKER_IDS
        }
        self.session: ZooKeeperSession | None = None

    def _arguments(self, broker_id: int) -> list[str]:
        return [
            "--broker-id", str(broker_id), "--zookeeper", self.connect,
            "--zookeeper-session-timeout-ms", str(self.session_timeout_ms),
            *(f"--config={pair}" for pair in self.server_config),
        ]  # fmt: skip

    def start(self) -> BenchCluster:
        for process in self.brokers.values():
            process.start()
        self.session = ZooKeeperSession(self.connect, session_timeout_ms=self.session_timeout_ms)
        wait_for("three live brokers", lambda: len(self.live_addresses()) == 3, STATE_TIMEOUT_S)
        return self

    @property
    def zookeeper(self) -> ZooKeeperSession:
        assert self.session is not None, "start() first"
        return self.session

    def admin(self, broker_id: int | None = None) -> RemoteBroker:
        """A client of one running broker (any, by default); the caller closes it."""
        if broker_id is None:
            broker_id = next(i for i, process in self.brokers.items() if process.running)
        options = ConnectionOptions(request_timeout_ms=ADMIN_TIMEOUT_MS)
        return RemoteBroker(self.brokers[broker_id].address, options)

    def add_broker(self, broker_id: int) -> ServerProcess:
        """A new broker joins (it holds nothing until partitions move to it)."""
        assert broker_id not in self.brokers, broker_id
        process = ServerProcess(
            f"broker-{broker_id}", self.root / f"b{broker_id}", self._arguments(broker_id)
        )
        self.brokers[broker_id] = process
        process.start()
        wait_for(f"broker {broker_id} registered", lambda: self.registered(broker_id), 30.0)
        return process

    def create_topic(
        self,
        topic: str,
        partitions: int,
        replication_factor: int = REPLICATION_FACTOR,
        config: dict[str, str] | None = None,
    ) -> dict[int, PartitionState]:
        """Create and wait until every partition has a leader and a full ISR; their states."""
        settings = {"replication.factor": str(replication_factor), **(config or {})}
        with self.admin() as admin:
            admin.create_topic(topic, partitions, settings)
        return {p: self.wait_full_isr(topic, p, replication_factor) for p in range(partitions)}

    def state(self, topic: str, partition: int) -> PartitionState | None:
        return read_partition_state(self.zookeeper, topic, partition)

    def wait_full_isr(
        self, topic: str, partition: int, replication_factor: int = REPLICATION_FACTOR
    ) -> PartitionState:
        def full() -> PartitionState | None:
            state = self.state(topic, partition)
            if state is None or state.leader <= 0:
                return None
            return state if len(state.isr) == replication_factor else None

        return wait_for(f"{topic}-{partition} with a leader and a full ISR", full, STATE_TIMEOUT_S)

    def wait_every_full_isr(self) -> int:
        """Every partition of every topic ZooKeeper has (``__txn_journal`` included) with
        a leader and all its replicas in the ISR: a whole cluster again after a restart.
        The number of partitions."""
        topics = self.zookeeper.wait(self.zookeeper.client.get_children_async(znodes.TOPICS))
        count = 0
        for topic in sorted(topics):
            for partition in sorted(read_topic_partition_states(self.zookeeper, topic)):

                def whole(topic: str = topic, partition: int = partition) -> bool:
                    state = self.state(topic, partition)
                    return (
                        state is not None
                        and state.leader > 0
                        and set(state.isr_ids) == set(state.replicas)
                    )

                wait_for(
                    f"{topic}-{partition} with every replica in the ISR", whole, STATE_TIMEOUT_S
                )
                count += 1
        return count

    def journal_partitions(self) -> int:
        """The cluster's ``__txn_journal`` partition count, fixed when it was created."""
        data, _ = self.zookeeper.wait(self.zookeeper.client.get_async(znodes.CLUSTER_ID))
        return int(json.loads(data)["journal_partitions"])

    def live_addresses(self) -> dict[int, str]:
        """Registered brokers' addresses, as ZooKeeper has them (what a client would use)."""
        return {i: info.address for i, info in live_brokers(self.zookeeper).items()}

    def registered(self, broker_id: int) -> bool:
        client = self.zookeeper.client
        found = self.zookeeper.wait(client.exists_async(znodes.broker_path(broker_id)))
        return found is not None

    def controller_id(self) -> int:
        try:
            data, _ = self.zookeeper.wait(self.zookeeper.client.get_async(znodes.CONTROLLER))
        except NoNodeError:
            return -1
        return int(json.loads(data)["broker_id"])

    def leader_address(self, topic: str, partition: int) -> str:
        state = self.wait_full_isr(topic, partition)
        return self.brokers[state.leader].address

    def partition_dir(self, broker_id: int, topic: str, partition: int) -> Path:
        return self.brokers[broker_id].data_dir / "logs" / f"{topic}-{partition}"

    def close(self) -> None:
        """Kill every broker's process group (no graceful stop: the figures are taken)."""
        for process in self.brokers.values():
            process.kill_group()
        if self.session is not None:
            self.session.close()
            self.session = None
