"""Cluster brokers in one process, for the replication tests: their followers' fetches are
handed over directly (no transport, no ZooKeeper), and a router stands for the network
between a transaction coordinator and the partition leaders (what a cluster transport
does: each call reaches the partition's current live leader).

    cut       brokers that neither fetch nor are fetched from (a dead or isolated broker),
              except for the transaction journal: the coordinator these tests use stands
              apart from the partition-side faults they inject
    crashed   brokers the router no longer reaches: one whose call raised a failpoint
              "died" at that point (its followers may still fetch what it had written,
              until the test cuts it too)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from log_support import read_all

from twinlog.engine.base.errors import NotLeaderOrFollowerError
from twinlog.engine.base.failpoints import FailpointError
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.broker import Broker
from twinlog.engine.broker.internal_topics import TXN_JOURNAL_TOPIC
from twinlog.engine.broker.partition_role import Role
from twinlog.engine.records.batch_reader import iter_batches
from twinlog.engine.transactions.partition_calls import (
    ApplyAbort,
    ApplyCommit,
    CountEntries,
    EntryCount,
    PartitionLeaders,
    RegisterPartition,
    SettleOffsetsHolder,
)

TOPIC = TopicPartition("orders", 0)
TXN_JOURNAL = TopicPartition(TXN_JOURNAL_TOPIC, 0)
BROKER_IDS = (1, 2, 3)
EPOCHS = {1: 101, 2: 102, 3: 103}  # broker epochs (their registrations)
Result = TypeVar("Result")


class Cluster:
    def __init__(self, root: Path, **config: object) -> None:
        self.brokers = {
            broker_id: Broker.open(
                root / f"b{broker_id}", broker_id=broker_id, journal_partitions=1, **config
            )
            for broker_id in BROKER_IDS
        }
        for broker_id, broker in self.brokers.items():
            broker.broker_epoch = EPOCHS[broker_id]
            broker.create_topic(TOPIC.topic, 1)
        self.cut: set[int] = set()
        self.crashed: set[int] = set()
        self._stop = threading.Event()
        self._pump: threading.Thread | None = None

    def roles(
        self,
        leader: int,
        epoch: int,
        isr: tuple[int, ...] = BROKER_IDS,
        to: Iterable[int] | None = None,
    ) -> None:
        """The controller's word, to ``to`` (default: every broker not cut)."""
        targets = [b for b in BROKER_IDS if b not in self.cut] if to is None else list(to)
        for broker_id in targets:
            self.brokers[broker_id].take_partition_role(
                TOPIC, leader, epoch, BROKER_IDS, {member: EPOCHS[member] for member in isr}
            )

    def pump_once(self) -> None:
        for follower_id, follower in self.brokers.items():
            for leader_id, leader in self.brokers.items():
                if leader_id == follower_id:
                    continue
                request = follower.replica_fetch_request(leader_id, max_wait_ms=0)
                if request is not None and (follower_id in self.cut or leader_id in self.cut):
                    journal_only = tuple(
                        p for p in request.partitions if p.topic_partition[0] == TXN_JOURNAL_TOPIC
                    )
                    request = replace(request, partitions=journal_only) if journal_only else None
                if request is not None:
                    follower.apply_replica_fetch(leader_id, leader.replica_fetch(request))

    def start_pumping(self) -> None:
        def run() -> None:
            while not self._stop.is_set():
                self.pump_once()
                time.sleep(0.002)

        self._pump = threading.Thread(target=run, daemon=True)
        self._pump.start()

    def stop_pumping(self) -> None:
        self._stop.set()
        if self._pump is not None:
            self._pump.join(5)
        self._stop.clear()

    def use_group_coordinator(self, group_id: str, broker_id: int, epoch: int = 1) -> Broker:
        """``broker_id`` leads the ``__consumer_offsets`` partition of ``group_id`` from
        ``epoch``: it is the group's coordinator once it has loaded it."""
        broker = self.brokers[broker_id]
        offsets_partition = broker.group_offsets.partition_for(group_id)
        for each in self.brokers.values():
            each.take_partition_role(offsets_partition, broker_id, epoch, BROKER_IDS, dict(EPOCHS))
        slots = broker.group_coordinators.slots
        assert slots is not None
        if not slots.wait_active(offsets_partition.partition, timeout_s=10):
            raise AssertionError(f"broker {broker_id}'s group coordinator did not load")
        return broker

    def use_coordinator(self, coordinator_id: int, epoch: int = 1) -> Broker:
        """Every transaction goes through ``coordinator_id``'s coordinator (the leader of
        ``__txn_journal-0`` from ``epoch``), which reaches the partition's leader wherever
        it is (``RoutingLeaders``). Called again: the coordinator fails over."""
        coordinator = self.brokers[coordinator_id]
        for broker in self.brokers.values():  # coordinator_id leads __txn_journal-0
            broker.take_partition_role(TXN_JOURNAL, coordinator_id, epoch, BROKER_IDS, dict(EPOCHS))
        if not coordinator.wait_coordinator(0, timeout_s=10):
            raise AssertionError(f"broker {coordinator_id}'s coordinator did not load")
        router = RoutingLeaders(
            self, {b: broker.local_partition_leaders for b, broker in self.brokers.items()}
        )
        for broker_id, broker in self.brokers.items():
            broker.partition_leaders = router
            broker.transaction_coordinators = (
                broker.here_coordinators
                if broker_id == coordinator_id
                else ToCoordinatorBroker(coordinator)
            )
        return coordinator

    def partition(self, broker_id: int):
        return self.brokers[broker_id].partition(TOPIC)

    def log_bytes(self, broker_id: int) -> bytes:
        return read_all(self.partition(broker_id).log)

    def values(self, broker: Broker) -> list[bytes | None]:
        """The record values of ``broker``'s data log of TOPIC (past any high watermark)."""
        data = read_all(broker.partition(TOPIC).log)
        return [record.value for item in iter_batches(data) for record in item.records()]

    def journal_log_bytes(self, broker_id: int) -> bytes:
        return read_all(self.brokers[broker_id].journal.journal_log(str(TOPIC)))

    def close(self) -> None:
        self.stop_pumping()
        for broker in self.brokers.values():
            broker.close()


class RoutingLeaders:
    """``PartitionLeaders`` over the in-process cluster: each call to the partition's live
    leader; a leader whose call raised a failpoint has crashed there."""

    def __init__(self, cluster: Cluster, local: dict[int, PartitionLeaders]) -> None:
        self.cluster = cluster
        self.local = local  # each broker's own, in-process

    def _leader_of(self, topic_partition: TopicPartition) -> int:
        for broker_id, broker in self.cluster.brokers.items():
            if broker_id in self.cluster.cut or broker_id in self.cluster.crashed:
                continue
            partition = broker.partition_manager.get(topic_partition)
            if partition is not None and partition.role.role is Role.LEADER:
                return broker_id
        raise NotLeaderOrFollowerError(f"{topic_partition}: no live leader reachable")

    def _call(
        self, topic_partition: TopicPartition, call: Callable[[PartitionLeaders], Result]
    ) -> Result:
        broker_id = self._leader_of(topic_partition)
        try:
            return call(self.local[broker_id])
        except FailpointError:
            self.cluster.crashed.add(broker_id)
            raise

    def leader_epoch(self, topic_partition: TopicPartition) -> int:
        try:
            return self._call(
                topic_partition, lambda leaders: leaders.leader_epoch(topic_partition)
            )
        except NotLeaderOrFollowerError:
            return 0

    def count_entries(self, request: CountEntries) -> EntryCount:
        return self._call(request.topic_partition, lambda leaders: leaders.count_entries(request))

    def apply_commit(self, request: ApplyCommit) -> None:
        self._call(request.topic_partition, lambda leaders: leaders.apply_commit(request))

    def apply_abort(self, request: ApplyAbort) -> None:
        self._call(request.topic_partition, lambda leaders: leaders.apply_abort(request))


class ToCoordinatorBroker:
    """``TransactionCoordinators``: a partition's registration, to another broker's
    coordinator."""

    def __init__(self, coordinator: Broker) -> None:
        self.coordinator = coordinator

    def register_partition(self, request: RegisterPartition) -> None:
        self.coordinator.register_partition_here(request)

    def settle_offsets_holder(self, request: SettleOffsetsHolder) -> None:
        self.coordinator.settle_offsets_holder_here(request)
