"""The embedded broker: one object owning partitions, journals, copier and coordinators.

    broker = Broker.open("/var/lib/twinlog", journal_partitions=4)
    ...
    broker.close()

It runs in-process with no network; ``rpc`` is a thin layer over it. ``Broker`` is
the facade: it opens the parts, checks each request and hands it to the part that
owns it: partitions (``partition_manager``), transaction coordinators
(``coordinator_manager``), group coordinators (``group_coordinators``, ``consumer_groups``),
topics (``topic_manager``); a batch's checks are ``produce_checks``. Background rounds
are in ``scheduler``; who may take a group's offsets into a transaction (KIP-447) is in
``group_offset_fencing``. The data directory's layout is in ``docs/design.md``, "On disk".

Topics, ids and checkpoint pointers come through two Protocols, ``MetadataStore``
and ``IdSource``: the local files by default, a shared store when given to ``open``.

One node and a cluster run the same code: a single node is a cluster of one, whose
sole member (``membership``) leads every partition with ISR {itself}; a cluster broker's
ZooKeeper member (``rpc.cluster.cluster_member``) gives the roles the controller decides.

Start-up and closing are ``broker_lifecycle``'s.

Thread rule: every public method may be called from any thread.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType
from typing import Any

from twinlog.engine.base.errors import (
    InvalidConfigError,
    LogClosedError,
    NotCoordinatorError,
    NotEnoughResourcesError,
    OffsetMetadataTooLargeError,
    TwinlogError,
)
from twinlog.engine.base.types import (
    FetchResult,
    ProducerDescription,
    ProduceResult,
    ProducerIdentity,
    TopicDescription,
    TopicPartition,
    TransactionDescription,
)
from twinlog.engine.base.units import MEBIBYTE
from twinlog.engine.broker.broker_lifecycle import BrokerLifecycle, prepare_data_dir
from twinlog.engine.broker.broker_stats import BrokerStats, collect_stats
from twinlog.engine.broker.config import BrokerConfig
from twinlog.engine.broker.consumer_groups import ConsumerGroups
from twinlog.engine.broker.coordinator_manager import CoordinatorManager
from twinlog.engine.broker.group_coordinators import GroupCoordinators
from twinlog.engine.broker.group_offset_fencing import settle_holder
from twinlog.engine.broker.group_offsets import (
    OFFSETS_TOPIC,
    as_committed,
    build_offsets_batch,
)
from twinlog.engine.broker.internal_topics import TXN_JOURNAL_TOPIC, is_internal
from twinlog.engine.broker.leader_elections import ElectionResult, check_timeout
from twinlog.engine.broker.membership import (
    SOLE_BROKER_EPOCH,
    SOLE_BROKER_ID,
    AwaitingCluster,
    Membership,
)
from twinlog.engine.broker.metadata_store import MetadataStore
from twinlog.engine.broker.partition import Partition
from twinlog.engine.broker.partition_manager import PartitionManager
from twinlog.engine.broker.partition_role import Role
from twinlog.engine.broker.produce_checks import check_produced_batch, check_request_matches_batch
from twinlog.engine.broker.producer_owner import is_idempotent
from twinlog.engine.broker.reassignments import (
    MoveResult,
    PartitionMove,
    Reassignment,
    check_request,
)
from twinlog.engine.broker.scheduler import Scheduler
from twinlog.engine.broker.seam_adapters import (
    HereCoordinators,
)
from twinlog.engine.broker.topic_manager import TopicManager
from twinlog.engine.broker.unnamed_transactions import open_or_begin, transaction_of_batch
from twinlog.engine.groups.classic_member import ClassicMember
from twinlog.engine.groups.group_calls import (
    OUTSIDE_ANY_GROUP,
    GroupDescription,
    GroupHeartbeat,
    GroupHeartbeatAnswer,
    GroupListing,
    GroupMemberRef,
    OffsetAndMetadata,
)
from twinlog.engine.log import DataLog
from twinlog.engine.log.config import topic_settings
from twinlog.engine.log.leader_epochs import NO_EPOCH, EpochEnd
from twinlog.engine.records.batch_format import (
    NO_TRANSACTION_ID,
    validate_batch,
)
from twinlog.engine.records.decompression_budget import DecompressionBudget
from twinlog.engine.replication.divergence import diverging_epoch
from twinlog.engine.replication.fetch_calls import (
    FetchedPartition,
    ReplicaFetch,
)
from twinlog.engine.replication.replica_set import IsrChange
from twinlog.engine.replication.replication_settings import ReplicationSettings
from twinlog.engine.transactions.coordinator import Coordinator
from twinlog.engine.transactions.coordinator_slots import CoordinatorSlots
from twinlog.engine.transactions.id_source import IdSource
from twinlog.engine.transactions.partition_calls import (
    IssuedProducer,
    LookupProducer,
    RegisterPartition,
    SettleOffsetsHolder,
    TransactionCoordinators,
)
from twinlog.engine.transactions.transaction_metadata import now_ms
from twinlog.engine.transactions.transaction_timings import TransactionTimings
from twinlog.engine.transactions.txn_state import TransactionEvent

log = logging.getLogger(__name__)


class Broker(BrokerLifecycle):
    def __init__(
        self,
        data_dir: Path,
        config: BrokerConfig,
        metadata: MetadataStore | None = None,
        ids: IdSource | None = None,
        broker_id: int | None = None,
        coordinator_ids: Callable[[], IdSource] | None = None,
    ) -> None:
        """Use ``Broker.open``."""
        self._given_coordinator_ids = coordinator_ids
        self.data_dir = data_dir
        # One node is a cluster of one (``membership``): its sole member leads every
        # partition with ISR {itself}, so the cluster's replication settings that assume
        # more copies (a topic's default replication factor, min_insync_replicas) are 1.
        if broker_id is None:
            config = dataclasses.replace(
                config, default_replication_factor=1, min_insync_replicas=1
            )
        self.config = config
        self.broker_id = SOLE_BROKER_ID if broker_id is None else broker_id
        # The partitions are replicated (on one node, to nobody); they wake the long polls
        # of consumers and followers in the settings' one purgatory (``long_poll``).
        self.replication = ReplicationSettings(
            self.broker_id,
            min_insync_replicas=config.min_insync_replicas,
            lag_time_max_ms=config.replica_lag_time_max_ms,
            ack_timeout_ms=config.replica_ack_timeout_ms,
            replica_fsync=config.replica_fsync,
        )
        # What gives the partitions and coordinators their roles: the sole member of a
        # single node (set at start-up), or a ZooKeeper member (``rpc.server``'s
        # ClusterMember sets itself here once it joins).
        self._sole_member = broker_id is None
        self.membership: Membership = AwaitingCluster()
        self._given_metadata = metadata  # None: the local files, opened by _start
        self._given_ids = ids
        self._closed = False
        # False from the start of a controlled shutdown: this broker's coordinators begin no
        # new transaction (``stop_beginning_transactions``).
        self._begins_taken = True
        self._admin_lock = threading.RLock()
        self.scheduler = Scheduler()
        self._decompression_budget = DecompressionBudget(config.decompressed_bytes_in_flight_max)
        self.transaction_timings = TransactionTimings()  # shared by the coordinators
        # The coordinator <-> partition seam (partition_calls, seam_adapters): in-process by
        # default. In a cluster a transport replaces them, so a coordinator reaches
        # partitions led elsewhere and a partition reaches the coordinator of a transaction
        # begun elsewhere. ``local_partition_leaders`` (set at start-up) and
        # ``here_coordinators`` are what a transport's server side calls: this broker's own
        # partitions and coordinators, never forwarded.
        self.here_coordinators = HereCoordinators(self)
        self.transaction_coordinators: TransactionCoordinators = self.here_coordinators
        # the cluster registration's (KIP-380), set by a ZooKeeper member; the sole member's
        self.broker_epoch = SOLE_BROKER_EPOCH
        # The parts, each set once by _start in the order its docstring gives.
        self.partition_manager: PartitionManager
        self.topic_manager: TopicManager
        self.group_coordinators: GroupCoordinators
        self.consumer_groups: ConsumerGroups
        self.coordinator_manager: CoordinatorManager

    # --- life cycle ---------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        data_dir: str | os.PathLike[str],
        *,
        metadata: MetadataStore | None = None,
        ids: IdSource | None = None,
        broker_id: int | None = None,
        coordinator_ids: Callable[[], IdSource] | None = None,
        **config: Any,
    ) -> Broker:
        """Open (creating if needed) the broker in ``data_dir`` and recover it.

        ``metadata`` and ``ids`` default to the data directory's own files
        (``LocalMetadataStore``, ``LocalIdSource``). ``broker_id``: a cluster broker,
        whose partitions serve nothing until the cluster gives each a role
        (``take_partition_role``, from its ZooKeeper member); None: a single node, a
        cluster of one whose sole member (``membership``) leads everything before
        ``open`` returns.
        ``coordinator_ids``: a cluster broker's source of ids for each coordinator it
        loads, taking a fresh block so ids stay increasing per coordinator across
        brokers (``ZooKeeperIdSource``); default ``ids``.
        """
        directory = prepare_data_dir(Path(data_dir))
        broker = cls(
            directory, BrokerConfig.from_mapping(config), metadata, ids, broker_id, coordinator_ids
        )
        try:
            broker._start()
        except BaseException:
            try:
                broker._close_opened()
            except BaseException as close_error:  # never over the reason the start failed
                log.warning("closing after a failed start: %s", close_error)
            raise
        broker._say_if_disk_full()
        return broker

    @property
    def coordinators(self) -> list[Coordinator]:
        """The coordinators active on this broker: those of the journal partitions it leads
        and has loaded (on one node, all of them once open)."""
        return self.coordinator_manager.active

    @property
    def cluster_id(self) -> str:
        """The cluster's id (32 hex digits, random): given with the data directory on one
        node, kept in ZooKeeper in a cluster. Kafka's tools key what they know by it."""
        return self.metadata.cluster_id

    @property
    def is_sole_member(self) -> bool:
        """A single node: its sole member leads everything and no other broker exists, so
        nothing calls its broker-to-broker services (the server leaves them out)."""
        return self._sole_member

    def partition(self, topic_partition: TopicPartition) -> Partition:
        """The partition ``topic_partition`` names, as this broker holds it (its log, high
        watermark, role and producers): UnknownTopicOrPartitionError when there is none."""
        return self.partition_manager.partition(TopicPartition(*topic_partition))

    def wait_coordinator(self, journal_partition: int, timeout_s: float) -> bool:
        """Until this cluster broker's coordinator ``journal_partition`` is active."""
        return self.coordinator_manager.wait_active(journal_partition, timeout_s)

    def close(self) -> None:
        """Stop background work, flush and close everything. The coordinators write nothing
        more, as after a crash: a commit decided but not yet applied everywhere is applied by
        the next leader of its journal partition (on one node, at the next open), from the
        journal, idempotently."""
        if self._closed:
            return
        self._closed = True
        self.replication.long_poll.wake_all()  # followers' polls see it and return
        self.scheduler.stop()
        self._close_opened()
        log.info("broker closed")

    def __enter__(self) -> Broker:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError("the broker is closed; open it again")

    # --- transaction ids ----------------------------------------------------------------------

    def low_watermark(self) -> int:
        """Smallest transaction id that may still be in flight (``coordinator_manager``)."""
        return self.coordinator_manager.low_watermark()

    # --- topics (topic_manager) ------------------------------------------------------------

    def create_topic(
        self, name: str, partitions: int = 1, config: Mapping[str, str] | None = None
    ) -> TopicDescription:
        self._check_open()
        return self.topic_manager.create(name, partitions, config)

    def create_partitions(
        self, name: str, partitions: int, *, validate_only: bool = False
    ) -> TopicDescription:
        """Grow ``name`` to ``partitions`` partitions in all (topics never shrink);
        ``validate_only``: check, change nothing."""
        self._check_open()
        return self.topic_manager.grow(name, partitions, validate_only=validate_only)

    def alter_topic_config(
        self,
        name: str,
        set_values: Mapping[str, str],
        deleted: Sequence[str] = (),
        *,
        validate_only: bool = False,
    ) -> TopicDescription:
        """Set ``set_values`` and return ``deleted`` to the broker's defaults, on a topic
        that is open: its partitions take them at once, on every broker of a cluster."""
        self._check_open()
        return self.topic_manager.alter_config(
            name, set_values, deleted, validate_only=validate_only
        )

    def topic_config_changed(self, name: str) -> int:
        """The cluster says ``name``'s settings changed: its partitions here take them."""
        self._check_open()
        return self.topic_manager.apply_config(name)

    def delete_topic(self, name: str) -> None:
        self._check_open()
        self.topic_manager.delete(name)

    def list_topics(self) -> list[str]:
        return self.topic_manager.names()

    def describe_topic(self, name: str) -> TopicDescription:
        return self.topic_manager.describe(name)

    def auto_create_topic(
        self, name: str, creating: Callable[[], AbstractContextManager[object]] | None = None
    ) -> TopicDescription:
        """``name`` described, created first when it does not exist and the broker's
        ``auto_create_topics_enable`` is on, with ``num_partitions`` and
        ``default_replication_factor`` (a producer's first send, Kafka's topic
        auto-creation). ``creating`` wraps the creation only: a door's CREATE check and
        audit line. UnknownTopicOrPartitionError when it is not created (the setting off,
        an internal name)."""
        self._check_open()
        return self.topic_manager.auto_create(name, creating)

    def elect_preferred_leaders(
        self, partitions: Sequence[TopicPartition] | None, timeout_ms: int
    ) -> list[ElectionResult]:
        """Lead ``partitions`` (None: every partition) by their preferred leaders, each its
        first replica, where that replica is in sync (Kafka's ElectLeaders, PREFERRED);
        waits at most ``timeout_ms`` (``leader_elections.ELECT_TIMEOUT_MS_MAX`` at most). One
        result per partition."""
        self._check_open()
        check_timeout(timeout_ms)
        return self.membership.elect_preferred_leaders(partitions, timeout_ms)

    def reassign_partitions(
        self,
        moves: Sequence[PartitionMove],
        throttle_bytes_per_s: int,
        timeout_ms: int,
    ) -> list[MoveResult]:
        """Move partitions to other replicas (Kafka's AlterPartitionReassignments): each
        ``PartitionMove`` names its target replicas, or none to cancel. New replicas copy
        at most ``throttle_bytes_per_s`` (0: no limit). Waits at most ``timeout_ms`` for
        the controller to take the moves; the copy runs on (``partition_reassignments``).
        One result per move."""
        self._check_open()
        check_request(timeout_ms, throttle_bytes_per_s)
        return self.membership.reassign_partitions(moves, throttle_bytes_per_s, timeout_ms)

    def partition_reassignments(self) -> list[Reassignment]:
        """The reassignments that run (Kafka's ListPartitionReassignments), with how far
        behind each new replica is for the partitions this broker leads."""
        self._check_open()
        running = []
        for reassignment in self.membership.running_reassignments():
            partition = self.partition_manager.get(
                TopicPartition(reassignment.topic, reassignment.partition)
            )
            if partition is not None:
                progress = tuple(partition.replica_progress(reassignment.adding))
                reassignment = dataclasses.replace(reassignment, progress=progress)
            running.append(reassignment)
        return running

    def log_dir_usage(self) -> tuple[str, list[tuple[TopicPartition, int]]]:
        """Where the partitions' logs are, and each open partition's data-log size in bytes
        (Kafka's DescribeLogDirs of this broker's one log directory)."""
        sizes = [(p.topic_partition, p.log.size_bytes()) for p in self.partition_manager.all()]
        return str(self.data_dir / "logs"), sorted(sizes)

    def topic_settings(self, name: str) -> list[tuple[str, str, bool]]:
        """(name, value, set on the topic) of each of the topic's settings under Kafka's
        names, the broker's defaults included (Kafka's DescribeConfigs of a topic)."""
        description = self.topic_manager.describe(name)
        # As the partitions open their logs: the broker's defaults under the topic's own
        # (whether or not this broker holds a replica of it)
        config = self.partition_manager.log_config(description.config)
        return topic_settings(config, description.config)

    # --- producing ------------------------------------------------------------------------------

    def init_producer(
        self,
        transactional_id: str | None = None,
        transaction_timeout_ms: int | None = None,
        owner: str | None = None,
    ) -> ProducerIdentity:
        """Producer id and generation. No transactional id: a fresh idempotent producer,
        given to principal ``owner`` if named (``producer_owner``)."""
        self._check_open()
        if transactional_id is None:
            transactional_id = self.coordinator_manager.idempotent_transactional_id(owner)
        elif not transactional_id or is_idempotent(transactional_id):
            raise InvalidConfigError(f"transactional id {transactional_id!r} is not allowed")
        if (
            transaction_timeout_ms is not None
            and transaction_timeout_ms > self.config.transaction_timeout_ms_max
        ):
            raise InvalidConfigError(
                f"transaction timeout {transaction_timeout_ms} ms is above the broker's maximum "
                f"{self.config.transaction_timeout_ms_max} ms (transaction_timeout_ms_max)"
            )
        coordinator = self.coordinator_manager.for_transactional_id(transactional_id)
        return coordinator.init_producer(
            transactional_id, transaction_timeout_ms or self.config.transaction_timeout_ms_default
        )

    def produce(
        self,
        topic: str,
        partition: int,
        batch: bytes,
        attempt: str = "",
        transaction_id: int = NO_TRANSACTION_ID,
        current_leader_epoch: int = NO_EPOCH,
    ) -> ProduceResult:
        """Append a plain batch to the data log, or journal a transactional one.

        ``attempt`` tags a transactional batch with the writer's task attempt (the
        Spark sink); a commit naming attempts applies only theirs. ``transaction_id``
        names the transaction of a transactional batch (the batch carries only the
        transactional bit, as in Kafka); when not given, the producer's open one.
        ``current_leader_epoch``, when given, is checked first (``client_leader_epoch``).
        """
        self._check_open()
        target = self.partition(TopicPartition(topic, partition))
        if current_leader_epoch != NO_EPOCH:
            target.epochs.check_leader_epoch(current_leader_epoch)
        header = check_produced_batch(target, batch, self.config, self._decompression_budget)
        check_request_matches_batch(header, transaction_id, attempt)
        if not header.is_transactional:
            return target.append_plain(batch, header)
        sequences_per_epoch = transaction_id == NO_TRANSACTION_ID
        if sequences_per_epoch:  # a Kafka producer's batch (unnamed_transactions)
            transaction_id = transaction_of_batch(target, header, self.transaction_coordinators)
        # The partition registers itself with the transaction's coordinator on the first
        # batch, and checks the later ones itself (partition_calls).
        return target.append_transactional(
            transaction_id, batch, header, attempt, sequences_per_epoch=sequences_per_epoch
        )

    def open_transaction(self, producer_id: int, producer_generation: int) -> int:
        """The producer generation's open transaction, begun if it has none: Kafka's implicit
        begin at AddPartitionsToTxn (``unnamed_transactions``)."""
        self._check_open()
        coordinator = self.coordinator_manager.for_id(producer_id)
        return open_or_begin(coordinator, producer_id, producer_generation, self.begin_transaction)

    def latest_transaction(self, producer_id: int, producer_generation: int) -> int | None:
        """The transaction an EndTxn of this producer generation ends: its open one, else the
        last it ended (a retried EndTxn); None if it never had one."""
        self._check_open()
        coordinator = self.coordinator_manager.for_id(producer_id)
        return coordinator.latest_transaction_of(producer_id, producer_generation)

    def register_partition_here(self, request: RegisterPartition) -> None:
        """A partition leader's first batch of a transaction this broker coordinates
        (``partition_calls``); NotCoordinatorError when another broker coordinates it."""
        self._check_open()
        self.coordinator_manager.for_id(request.transaction_id).register_partition(request)

    def stop_beginning_transactions(self) -> None:
        """A controlled shutdown begins: from now on this broker's coordinators begin no
        new transaction (NotCoordinatorError: the client finds the coordinator again once
        the leaderships have moved); those open go on. A BEGIN is answered before it is
        replicated (``coordinator``: "Two answers promise nothing durable"), and one taken
        while the leaderships move is lost with the old leader's unreplicated tail, so the
        producer's first send would find its transaction unknown at the new coordinator.
        Those answered before it are made durable here, before the leaderships move, for
        the same reason (a BEGIN from the last replication round was lost that way)."""
        self._begins_taken = False
        self.coordinator_manager.wait_written_durable()

    def begin_transaction(
        self, producer_id: int, producer_generation: int, request_id: int = 0
    ) -> int:
        self._check_open()
        if not self._begins_taken:
            raise NotCoordinatorError(
                "this broker is shutting down (a controlled shutdown moves its coordinators "
                "away) and begins no new transaction; find the coordinator again and retry"
            )
        open_count = self.coordinator_manager.in_flight_count()
        if open_count >= self.config.open_transactions_max:
            raise NotEnoughResourcesError(
                f"{open_count} transactions are open, the broker's limit (open_transactions_max); "
                "retry when some complete, or raise the limit"
            )
        coordinator = self.coordinator_manager.for_id(producer_id)
        transaction_id = coordinator.begin(producer_id, producer_generation, request_id)
        if not self._begins_taken:
            # A shutdown began while this BEGIN was written, after it read what to make
            # durable: answer once this one is, as it waited for those before it.
            coordinator.wait_written_durable()
        return transaction_id

    def add_partitions_to_transaction(
        self,
        transaction_id: int,
        producer_id: int,
        producer_generation: int,
        partitions: Iterable[TopicPartition],
    ) -> None:
        self._check_open()
        wanted = [TopicPartition(*p) for p in partitions]
        for topic_partition in wanted:
            self.partition(topic_partition)
        self.coordinator_manager.of_transaction(transaction_id, producer_id).add_partitions(
            transaction_id, producer_id, producer_generation, wanted
        )

    def send_offsets_to_transaction(
        self,
        transaction_id: int,
        producer_id: int,
        producer_generation: int,
        group_id: str,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata],
        member: GroupMemberRef = OUTSIDE_ANY_GROUP,
    ) -> None:
        """Journal the group's offsets in the transaction; they apply with it (KIP-447
        rules: a ``member`` of the group's current generation, ``group_offset_fencing``).
        An offset may carry metadata and a leader epoch (``OffsetAndMetadata``)."""
        self._check_open()
        wanted = self._offsets_to_commit(offsets)
        if not group_id:
            raise InvalidConfigError("group id must not be empty")
        # As the group's coordinator (the leader of its offsets partition P), which the
        # transaction's coordinator may not be: P registers with the transaction first (its
        # coordinator checks the producer and the state, and journals P in it, so a stale
        # or made-up transaction aborts nobody), then the fence settles the offsets'
        # holders with their coordinators, then the offsets batch is journaled on P like
        # any transactional batch; it is folded into memory when its APPLY comes.
        target = self.group_coordinators.coordinator_of(group_id)
        with self.consumer_groups.committing(group_id, member, wanted):
            sender = (producer_id, producer_generation)
            target.register_transaction(transaction_id, sender, group_id)
            batch = build_offsets_batch(group_id, wanted, transactional=True)
            header = validate_batch(batch)
            self.offset_fence.take(
                transaction_id,
                group_id,
                wanted,
                lambda: target.append_transactional(transaction_id, batch, header, sender=sender),
                newcomer_is_member=bool(member.member_id),
            )

    @property
    def decompression_budget(self) -> DecompressionBudget:
        """What every produced batch's records check reserves decompressed bytes from; the
        Kafka listener's rewrites reserve from it too (one bound for both doors)."""
        return self._decompression_budget

    def lookup_producer_here(self, request: LookupProducer) -> IssuedProducer:
        """What this broker's coordinator of ``request.producer_id`` knows of it (the
        transport's server side calls this); NotCoordinatorError when another broker
        coordinates it."""
        self._check_open()
        coordinator = self.coordinator_manager.for_id(request.producer_id)
        return IssuedProducer(
            coordinator.transactional_id_of(request.producer_id),
            coordinator.ongoing_transaction_of(request.producer_id, request.producer_generation),
        )

    def lookup_producer(self, producer_id: int, producer_generation: int) -> IssuedProducer:
        """What ``producer_id``'s coordinator knows of it, wherever it is (another broker's,
        on a cluster); raises retriably when it cannot be reached."""
        self._check_open()
        return self.transaction_coordinators.lookup_producer(
            LookupProducer(producer_id, producer_generation)
        )

    def settle_offsets_holder_here(self, request: SettleOffsetsHolder) -> None:
        """KIP-447's fence at the holder's coordinator, on this broker (the transport's
        server side calls this; ``TransactionCoordinators.settle_offsets_holder``)."""
        self._check_open()
        settle_holder(self.coordinator_manager.for_id(request.holder_id), request)

    def commit_transaction(
        self,
        transaction_id: int,
        producer_id: int,
        producer_generation: int,
        wait_for_applied: bool = False,
        attempts: Iterable[str] | None = None,
        batches_written: Mapping[TopicPartition, int] | None = None,
    ) -> None:
        """Commit: returns once PREPARE_COMMIT is durable (or applied, with ``wait_for_applied``).

        ``attempts`` (None: all) names the task attempts whose batches are applied;
        batches of other attempts are dropped. ``batches_written`` (None: not checked): how
        many batches the producer saw written to each partition; a partition whose journal
        holds fewer refuses the commit (TransactionDataMissingError: abort).
        """
        self._check_open()
        self.coordinator_manager.of_transaction(transaction_id, producer_id).commit(
            transaction_id,
            producer_id,
            producer_generation,
            wait_for_applied,
            attempts,
            batches_written,
        )

    def abort_transaction(
        self,
        transaction_id: int,
        producer_id: int,
        producer_generation: int,
        wait_for_applied: bool = False,
    ) -> None:
        """Abort: returns once PREPARE_ABORT is durable (or applied, with ``wait_for_applied``)."""
        self._check_open()
        self.coordinator_manager.of_transaction(transaction_id, producer_id).abort(
            transaction_id, producer_id, producer_generation, wait_for_applied
        )

    # --- replication (a cluster broker; engine.replication, partition_manager) ---------------

    def take_partition_role(
        self,
        topic_partition: TopicPartition,
        leader_id: int,
        leader_epoch: int,
        replicas: Iterable[int],
        isr: Mapping[int, int],
    ) -> None:
        """The cluster's word on a partition: ``leader_id`` leads it at ``leader_epoch``
        with ``isr`` ({broker id: broker epoch}). This broker leads or follows accordingly
        (stale words are ignored: ``partition_role``), and so do the coordinator or group
        slot of an internal topic's partition."""
        topic_partition = TopicPartition(*topic_partition)
        role = self.partition_manager.take_role(
            topic_partition, leader_id, leader_epoch, replicas, isr
        )
        slots = self._internal_slots_of(topic_partition.topic)
        if slots is not None and topic_partition.partition < slots.count:
            if role is Role.LEADER:
                slots.lead(topic_partition.partition, leader_epoch)
            else:
                slots.follow(topic_partition.partition)

    def drop_partition_replica(self, topic_partition: TopicPartition, leader_epoch: int) -> bool:
        """The cluster's word that this broker is no longer a replica of the partition (a
        reassignment moved it; ``leader_epoch`` is the state's that says so): its
        coordinator or group slot lets go, and its copy is removed (``TopicManager``).
        False when it held no copy."""
        topic_partition = TopicPartition(*topic_partition)
        slots = self._internal_slots_of(topic_partition.topic)
        if slots is not None and topic_partition.partition < slots.count:
            slots.follow(topic_partition.partition)
        return self.topic_manager.drop_replica(topic_partition, leader_epoch)

    def _internal_slots_of(self, topic: str) -> CoordinatorSlots[Any] | None:
        """The coordinator or group slots an internal topic's partitions carry; None for
        other topics."""
        if topic == TXN_JOURNAL_TOPIC:
            return self.coordinator_manager.slots
        if topic == OFFSETS_TOPIC:
            return self.group_coordinators.slots
        return None

    def topic_partition_counts(self) -> dict[str, int]:
        """Every topic (internal ones too) and its partition count (the sole member)."""
        return {name: topic.partitions for name, topic in self.metadata.topics().items()}

    def internal_slots(self) -> list[CoordinatorSlots[Any]]:
        """The transaction coordinators' and group coordinators' slots."""
        return [self.coordinator_manager.slots, self.group_coordinators.slots]

    def replica_fetch(self, request: ReplicaFetch) -> list[FetchedPartition]:
        """A follower's fetch (leader side; ``PartitionManager.replica_fetch``)."""
        self._check_open()
        return self.partition_manager.replica_fetch(request)

    def replica_fetch_request(self, leader_id: int, max_wait_ms: int = 500) -> ReplicaFetch | None:
        """What this follower fetches from ``leader_id`` now (None: it follows it nowhere)."""
        return self.partition_manager.replica_fetch_request(
            leader_id, self.broker_epoch, max_wait_ms
        )

    def apply_replica_fetch(self, leader_id: int, fetched: Iterable[FetchedPartition]) -> None:
        """The answers of ``leader_id`` to this follower's fetch."""
        self.partition_manager.apply_replica_fetch(leader_id, fetched)

    def isr_changes_due(
        self, registered_epochs: Mapping[int, int]
    ) -> list[tuple[TopicPartition, int, IsrChange]]:
        """The ISR changes this broker's led partitions should write now (KIP-497)."""
        return self.partition_manager.isr_changes_due(registered_epochs)

    def isr_change_done(
        self, topic_partition: TopicPartition, isr: Mapping[int, int] | None
    ) -> None:
        self.partition_manager.isr_change_done(topic_partition, isr)

    def fetch(
        self,
        topic: str,
        partition: int,
        offset: int,
        max_bytes: int = MEBIBYTE,
        max_wait_ms: int = 0,
        min_bytes: int = 1,
        current_leader_epoch: int = NO_EPOCH,
    ) -> FetchResult:
        """Records from ``offset`` (committed ones only); ``current_leader_epoch``, when
        given, is checked first (``client_leader_epoch``)."""
        self._check_open()
        if max_bytes <= 0:
            raise InvalidConfigError(f"max_bytes must be > 0, got {max_bytes}")
        target = self.partition(TopicPartition(topic, partition))
        if current_leader_epoch != NO_EPOCH:
            target.check_serves_clients()
            target.epochs.check_leader_epoch(current_leader_epoch)
        return target.fetch(offset, max_bytes, max_wait_ms, min_bytes)

    def wait_for_records(
        self, positions: Sequence[tuple[TopicPartition, int]], max_wait_ms: int
    ) -> bool:
        """A long poll over many partitions (``PartitionManager.wait_for_records``)."""
        self._check_open()
        return self.partition_manager.wait_for_records(positions, max_wait_ms)

    def list_offset(self, topic: str, partition: int, spec: str | int) -> int:
        """``"earliest"``, ``"latest"`` or a timestamp in ms (first offset at or after it).

        "latest", and a timestamp after every committed record, answer the high
        watermark: a consumer never learns an offset it may not read.
        """
        target = self.partition(TopicPartition(topic, partition))
        target.check_serves_clients()
        if spec == "earliest":
            return target.log.log_start_offset
        high_watermark = target.readable_end
        if spec == "latest":
            return high_watermark
        if isinstance(spec, int) and not isinstance(spec, bool):
            found = target.log.offset_for_timestamp(spec, self._decompression_budget)
            return high_watermark if found is None else min(found, high_watermark)
        raise InvalidConfigError(
            f"offset spec {spec!r}: use 'earliest', 'latest' or a timestamp in ms"
        )

    def client_leader_epoch(
        self, topic: str, partition: int, current_leader_epoch: int = NO_EPOCH
    ) -> int:
        """The partition's leader epoch, as a client's request on it sees it: its leader
        only (NotLeaderOrFollowerError elsewhere), and ``current_leader_epoch``, when the
        client sends one (not -1), checked against it first (Kafka's rule: older is
        FencedLeaderEpochError, newer UnknownLeaderEpochError)."""
        target = self.partition(TopicPartition(topic, partition))
        target.check_serves_clients()
        if current_leader_epoch != NO_EPOCH:
            target.epochs.check_leader_epoch(current_leader_epoch)
        return target.epochs.leader_epoch

    def epoch_of_offset(self, topic: str, partition: int, offset: int) -> int:
        """The leader epoch that appended ``offset`` in the partition's log (-1 if none
        the log still knows)."""
        return self.partition(TopicPartition(topic, partition)).log.epochs.epoch_for_offset(offset)

    def end_offset_for_leader_epoch(
        self, topic: str, partition: int, leader_epoch: int, current_leader_epoch: int = NO_EPOCH
    ) -> EpochEnd:
        """A consumer's OffsetForLeaderEpoch (KIP-320), answered by the leader only: for
        the largest epoch of the log <= ``leader_epoch``, that epoch and the offset after
        its last record, as far as consumers may read (the high watermark at most);
        (-1, -1) when the log knows no epoch that old. ``current_leader_epoch`` is checked
        as ``client_leader_epoch`` checks it."""
        self.client_leader_epoch(topic, partition, current_leader_epoch)
        target = self.partition(TopicPartition(topic, partition))
        readable_end = target.readable_end
        found = target.log.epochs.end_offset_for_epoch(leader_epoch, readable_end)
        if found.epoch == NO_EPOCH:
            return found
        return EpochEnd(found.epoch, min(found.end_offset, readable_end))

    def consumer_divergence(
        self, topic: str, partition: int, fetch_offset: int, last_fetched_epoch: int
    ) -> EpochEnd | None:
        """A consumer's fetch at ``fetch_offset`` whose last batch had ``last_fetched_epoch``
        (Fetch v12+): None when its log is a prefix of the leader's, else where the
        leader's log ends for that epoch (Kafka's diverging epoch, as a follower is
        answered: ``diverging_epoch``). A log of committed records, which no leader
        truncates, never parts from a consumer's that way."""
        target = self.partition(TopicPartition(topic, partition))
        log = target.log
        return diverging_epoch(
            log.epochs,
            log.log_start_offset,
            log.log_end_offset,
            fetch_offset,
            last_fetched_epoch,
        )

    def record_for_timestamp(
        self, topic: str, partition: int, timestamp_ms: int
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first committed record whose timestamp is >=
        ``timestamp_ms`` (Kafka's ListOffsets answers both); None when no readable record is
        that recent."""
        return self._readable_record(
            topic,
            partition,
            lambda log: log.record_for_timestamp(timestamp_ms, self._decompression_budget),
        )

    def record_with_max_timestamp(self, topic: str, partition: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first committed record holding the partition's largest
        timestamp (ListOffsets MAX_TIMESTAMP); None without readable records."""
        return self._readable_record(
            topic, partition, lambda log: log.record_with_max_timestamp(self._decompression_budget)
        )

    def _readable_record(
        self,
        topic: str,
        partition: int,
        find: Callable[[DataLog], tuple[int, int] | None],
    ) -> tuple[int, int] | None:
        """What ``find`` finds in the partition's log, if a consumer may read it yet."""
        target = self.partition(TopicPartition(topic, partition))
        target.check_serves_clients()
        found = find(target.log)
        return None if found is None or found[0] >= target.readable_end else found

    def commit_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata],
        member: GroupMemberRef = OUTSIDE_ANY_GROUP,
    ) -> None:
        """A plain (non-transactional) offset commit; from a group's ``member``, or from
        outside the group (only while it has no members: ``engine/groups``). An offset may
        carry metadata and a leader epoch (``OffsetAndMetadata``), kept and answered back
        by ``fetch_committed``; metadata longer than ``offset_metadata_max_bytes`` refuses
        the commit (OffsetMetadataTooLargeError, nothing committed)."""
        self._check_open()
        if not group_id:
            raise InvalidConfigError("group id must not be empty")
        wanted = self._offsets_to_commit(offsets)
        if not wanted:
            return
        target = self.group_coordinators.coordinator_of(group_id)
        with self.consumer_groups.committing(group_id, member, wanted):
            self.offset_fence.check_plain_commit(group_id, wanted)
            # a cluster leader answers once the in-sync replicas hold it (acks=all); folded
            # to the log end, so commits answered out of order still fold in offset order
            self._append_group_records(target, build_offsets_batch(group_id, wanted))

    def _offsets_to_commit(
        self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata]
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        wanted = {TopicPartition(*p): as_committed(o) for p, o in offsets.items()}
        too_large = self.metadata_too_large(wanted)
        if too_large:
            limit = self.config.offset_metadata_max_bytes
            raise OffsetMetadataTooLargeError(
                f"the metadata of {', '.join(map(str, sorted(too_large)))} is longer than "
                f"{limit} bytes (offset_metadata_max_bytes, Kafka's offset.metadata.max.bytes): "
                "commit shorter metadata, or raise the broker's limit"
            )
        return wanted

    def metadata_too_large(
        self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata]
    ) -> set[TopicPartition]:
        """The partitions whose metadata is longer than ``offset_metadata_max_bytes`` (in
        UTF-8 bytes): what a commit of ``offsets`` would be refused for."""
        limit = self.config.offset_metadata_max_bytes
        return {
            TopicPartition(*p)
            for p, o in offsets.items()
            if isinstance(o, OffsetAndMetadata) and len(o.metadata.encode("utf-8")) > limit
        }

    def group_heartbeat(self, call: GroupHeartbeat) -> GroupHeartbeatAnswer:
        """A member's heartbeat at its group's coordinator (join, leave, keep-alive)."""
        self._check_open()
        return self.consumer_groups.heartbeat(call)

    def classic_member(self, group_id: str, member_id: str) -> ClassicMember | None:
        """What Kafka's classic protocol keeps of a member between its calls (None: the
        group's coordinator has no such member, or it is not a classic one)."""
        self._check_open()
        return self.consumer_groups.membership.classic_member(group_id, member_id)

    def keep_classic_member(self, classic: ClassicMember) -> bool:
        """Keep it with the coordinator's member (False: that member is gone)."""
        self._check_open()
        return self.consumer_groups.membership.keep_classic_member(classic)

    def list_groups(self) -> list[GroupListing]:
        """The groups this broker coordinates (a cluster client asks every broker)."""
        self._check_open()
        return self.consumer_groups.list_groups()

    def describe_group(self, group_id: str) -> GroupDescription:
        self._check_open()
        return self.consumer_groups.describe_group(group_id)

    def delete_group(self, group_id: str) -> None:
        self._check_open()
        self.consumer_groups.delete_group(group_id)

    def delete_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, TwinlogError | None]:
        """Delete the group's committed offsets of ``partitions`` (Kafka's OffsetDelete):
        each partition's refusal, or None where its offset is deleted or it had none
        (``ConsumerGroups.delete_offsets`` has the rules)."""
        self._check_open()
        return self.consumer_groups.delete_offsets(group_id, partitions)

    def fetch_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]:
        self._check_open()
        self.group_coordinators.coordinator_of(group_id)
        return self.group_offsets.fetch(group_id, partitions)

    def fetch_committed(
        self, group_id: str, partitions: Iterable[TopicPartition] | None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """``fetch_offsets`` with each offset's metadata and leader epoch; ``partitions``
        None: every offset the group committed (none pending included, no error for a
        group that has none)."""
        self._check_open()
        self.group_coordinators.coordinator_of(group_id)
        if partitions is None:
            return self.group_offsets.committed_of(group_id)
        return self.group_offsets.fetch_committed(group_id, partitions)

    # --- administration ---------------------------------------------------------------------------

    def list_transactions(self) -> list[TransactionDescription]:
        return self.coordinator_manager.list_transactions()

    def admin_abort_transaction(self, transaction_id: int) -> None:
        self._check_open()
        self.coordinator_manager.admin_abort(transaction_id)

    def describe_producers(self, topic: str, partition: int) -> list[ProducerDescription]:
        return self.partition(TopicPartition(topic, partition)).describe_producers()

    def delete_records(self, topic: str, partition: int, before_offset: int) -> int:
        """Delete the partition's records below ``before_offset`` (-1: below the high
        watermark), Kafka's DeleteRecords, on its leader only (NotLeaderOrFollowerError
        elsewhere); the log start now, Kafka's low watermark (``Partition.delete_records``).
        An internal topic's records are the coordinators' state: InvalidConfigError."""
        self._check_open()
        if is_internal(topic):
            raise InvalidConfigError(
                f"{topic} is internal: its records are the broker's own state (committed "
                "offsets, transactions), which no client may delete; name a topic of yours"
            )
        return self.partition(TopicPartition(topic, partition)).delete_records(before_offset)

    def transactional_id_of(self, producer_id: int) -> str | None:
        """The transactional id a producer id belongs to (None: unknown); the server's ACLs
        need it. Producer ids survive restarts and re-inits, so this answer does too."""
        return self.coordinator_manager.transactional_id_of(
            producer_id, self.transaction_coordinators
        )

    # --- observability ---------------------------------------------------------------------------

    def stats(self) -> BrokerStats:
        """Figures for an operator (``broker_stats``): read-only, costs a walk of the state."""
        self._check_open()
        with self._admin_lock:  # topics come and go under it
            partitions = self.partition_manager.all()
        return collect_stats(
            self.coordinators,
            partitions,
            self.journal,
            self.group_offsets.committed(),
            self.transaction_timings,
        )

    # --- used by tests and tools -------------------------------------------------------------------

    def expire_transactions(self, now: int | None = None) -> list[int]:
        """Run the timeout check now (the background task runs it every interval)."""
        return self.coordinator_manager.expire(now if now is not None else now_ms())


__all__ = ["Broker", "TransactionEvent"]
