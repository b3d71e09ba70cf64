"""A small in-memory broker with the twinlog.Broker API, and an in-process server around it.

Only for testing the rpc layer's mapping (server <-> client, errors, auth,
batching) without disk; the end-to-end tests use the real broker in a real server
process. It holds no tests itself.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field

from twinlog.engine.base.errors import (
    GroupIdNotFoundError,
    InvalidConfigError,
    InvalidTxnStateError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    ProducerFencedError,
    TopicExistsError,
    TwinlogError,
    UnknownTopicOrPartitionError,
    UnknownTransactionError,
)
from twinlog.engine.base.types import (
    FetchResult,
    PartitionDescription,
    ProducerDescription,
    ProduceResult,
    ProducerIdentity,
    TopicDescription,
    TopicPartition,
    TransactionDescription,
    TransactionState,
)
from twinlog.engine.broker.leader_elections import ElectionResult, sole_results
from twinlog.engine.broker.producer_owner import idempotent_transactional_id
from twinlog.engine.broker.reassignments import (
    MoveResult,
    PartitionMove,
    Reassignment,
    sole_move_results,
)
from twinlog.engine.broker.topic_registry import check_growth
from twinlog.engine.groups.group_calls import OUTSIDE_ANY_GROUP, GroupMemberRef
from twinlog.engine.log.config import LogConfig, altered_topic_config, topic_settings
from twinlog.engine.records.batch_format import BASE_OFFSET_FORMAT
from twinlog.engine.records.batch_reader import RecordBatch
from twinlog.rpc.server.config import ServerConfig
from twinlog.rpc.server.server import RpcServer


@dataclass
class _Txn:
    transaction_id: int
    transactional_id: str
    producer_id: int
    producer_generation: int
    state: TransactionState = TransactionState.ONGOING
    batches: list[tuple[TopicPartition, bytes]] = field(default_factory=list)
    offsets: dict[str, dict[TopicPartition, int]] = field(default_factory=dict)


class FakeBroker:
    """Thread rule: any thread; one lock around everything."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self.logs: dict[TopicPartition, list[bytes]] = {}
        self.ends: dict[TopicPartition, int] = {}
        self.configs: dict[str, dict[str, str]] = {}
        self.generations: dict[str, tuple[int, int]] = {}
        self.sequences: dict[tuple[int, int, TopicPartition], int] = {}  # next expected
        self.transactions: dict[int, _Txn] = {}
        self.group_offsets: dict[tuple[str, TopicPartition], int] = {}
        self.starts: dict[TopicPartition, int] = {}  # moved by delete_records (else 0)
        self.next_id = 1
        self.closed = False
        self.produce_calls = 0

    def close(self) -> None:
        self.closed = True

    def _id(self) -> int:
        self.next_id += 1
        return self.next_id

    def _tp(self, topic: str, partition: int) -> TopicPartition:
        tp = TopicPartition(topic, partition)
        if tp not in self.logs:
            raise UnknownTopicOrPartitionError(f"no partition {tp}; create the topic first")
        return tp

    def create_topic(
        self, name: str, partitions: int = 1, config: Mapping[str, str] | None = None
    ) -> TopicDescription:
        with self._lock:
            if name in self.configs:
                raise TopicExistsError(f"topic {name!r} exists already")
            self.configs[name] = dict(config or {})
            for index in range(partitions):
                self.logs[TopicPartition(name, index)] = []
                self.ends[TopicPartition(name, index)] = 0
        return self.describe_topic(name)

    def auto_create_topic(
        self, name: str, creating: Callable[[], AbstractContextManager[object]] | None = None
    ) -> TopicDescription:
        """The real broker's defaults (on, one partition), its race rule too."""
        with self._lock:
            if name in self.configs:
                return self.describe_topic(name)
            try:
                with creating() if creating is not None else nullcontext():
                    return self.create_topic(name)
            except TopicExistsError:
                return self.describe_topic(name)

    def create_partitions(
        self, name: str, partitions: int, *, validate_only: bool = False
    ) -> TopicDescription:
        with self._lock:
            had = len(self.describe_topic(name).partitions)
            check_growth(name, had, partitions)
            if validate_only:
                return self.describe_topic(name)
            for index in range(had, partitions):
                self.logs[TopicPartition(name, index)] = []
                self.ends[TopicPartition(name, index)] = 0
        return self.describe_topic(name)

    def topic_settings(self, name: str) -> list[tuple[str, str, bool]]:
        given = self.describe_topic(name).config
        return topic_settings(LogConfig.from_mapping(given), given)

    def alter_topic_config(
        self,
        name: str,
        set_values: Mapping[str, str],
        deleted: Sequence[str] = (),
        *,
        validate_only: bool = False,
    ) -> TopicDescription:
        with self._lock:
            current = self.describe_topic(name).config
            if not validate_only:
                self.configs[name] = altered_topic_config(current, set_values, deleted)
        return self.describe_topic(name)

    def elect_preferred_leaders(
        self, partitions: Sequence[TopicPartition] | None, timeout_ms: int
    ) -> list[ElectionResult]:
        """One replica of each partition: every one is led by it already."""
        with self._lock:
            known = sorted(self.logs)
        return sole_results(known if partitions is None else partitions, known)

    def reassign_partitions(
        self, moves: Sequence[PartitionMove], throttle_bytes_per_s: int, timeout_ms: int
    ) -> list[MoveResult]:
        """One broker: every partition can only stay where it is."""
        with self._lock:
            counts = {tp.topic: 0 for tp in self.logs}
            for tp in self.logs:
                counts[tp.topic] = max(counts[tp.topic], tp.partition + 1)
        return sole_move_results(moves, counts, 0)

    def partition_reassignments(self) -> list[Reassignment]:
        return []

    def delete_topic(self, name: str) -> None:
        with self._lock:
            if name not in self.configs:
                raise UnknownTopicOrPartitionError(f"no topic {name!r}")
            del self.configs[name]
            for tp in [tp for tp in self.logs if tp.topic == name]:
                del self.logs[tp]

    def list_topics(self) -> list[str]:
        return sorted(self.configs)

    def describe_topic(self, name: str) -> TopicDescription:
        with self._lock:
            if name not in self.configs:
                raise UnknownTopicOrPartitionError(f"no topic {name!r}")
            parts = sorted(tp.partition for tp in self.logs if tp.topic == name)
            return TopicDescription(
                name,
                tuple(
                    PartitionDescription(p, 0, self.ends[TopicPartition(name, p)], 0, 0)
                    for p in parts
                ),
                dict(self.configs[name]),
            )

    def init_producer(
        self,
        transactional_id: str | None = None,
        transaction_timeout_ms: int | None = None,
        owner: str | None = None,
    ) -> ProducerIdentity:
        with self._lock:
            if transactional_id is None:
                producer_id = self._id()
                if owner:  # as the broker: the owner is recorded with the id (ACLs on)
                    named = idempotent_transactional_id(producer_id, owner)
                    self.generations[named] = (producer_id, 0)
                return ProducerIdentity(producer_id, 0)
            producer_id, generation = self.generations.get(transactional_id, (self._id(), -1))
            generation += 1
            self.generations[transactional_id] = (producer_id, generation)
            for txn in self.transactions.values():
                if (
                    txn.transactional_id == transactional_id
                    and txn.state is TransactionState.ONGOING
                ):
                    txn.state = TransactionState.ABORTED
            return ProducerIdentity(producer_id, generation)

    def _check_generation(self, producer_id: int, generation: int) -> None:
        for known_id, known_generation in self.generations.values():
            if known_id == producer_id and generation < known_generation:
                raise ProducerFencedError(f"producer {producer_id} generation {generation} fenced")

    def _append(self, tp: TopicPartition, batch: bytes) -> int:
        parsed = RecordBatch(batch)
        base = self.ends[tp]
        stamped = bytearray(batch)
        BASE_OFFSET_FORMAT.pack_into(stamped, 0, base)
        self.logs[tp].append(bytes(stamped))
        self.ends[tp] = base + parsed.header.last_offset_delta + 1
        self._lock.notify_all()
        return base

    def produce(
        self,
        topic: str,
        partition: int,
        batch: bytes,
        attempt: str = "",
        transaction_id: int = -1,
        current_leader_epoch: int = -1,
    ) -> ProduceResult:
        with self._lock:
            self.produce_calls += 1
            tp = self._tp(topic, partition)
            header = RecordBatch(batch).header  # checks the CRC
            if header.producer_id >= 0:
                self._check_generation(header.producer_id, header.producer_generation)
                key = (header.producer_id, transaction_id, tp)
                expected = self.sequences.get(key, 0)
                if header.base_sequence < expected:
                    return ProduceResult(-1, duplicate=True)
                if header.base_sequence > expected:
                    raise OutOfOrderSequenceError(
                        f"sequence {header.base_sequence} after {expected - 1} on {tp}"
                    )
                self.sequences[key] = expected + header.record_count
            if header.is_transactional:
                txn = self.transactions.get(transaction_id)
                if txn is None or txn.state is not TransactionState.ONGOING:
                    raise InvalidTxnStateError(f"transaction {transaction_id} not ongoing")
                txn.batches.append((tp, batch))
                return ProduceResult(-1)
            return ProduceResult(self._append(tp, batch))

    def begin_transaction(
        self, producer_id: int, producer_generation: int, request_id: int = 0
    ) -> int:
        with self._lock:
            self._check_generation(producer_id, producer_generation)
            transactional_id = next(
                tid for tid, (pid, _) in self.generations.items() if pid == producer_id
            )
            transaction_id = self._id()
            self.transactions[transaction_id] = _Txn(
                transaction_id, transactional_id, producer_id, producer_generation
            )
            return transaction_id

    def _txn(self, transaction_id: int, producer_id: int, generation: int) -> _Txn:
        self._check_generation(producer_id, generation)
        txn = self.transactions.get(transaction_id)
        if txn is None:
            raise UnknownTransactionError(f"transaction {transaction_id} unknown")
        if txn.producer_generation != generation:
            raise ProducerFencedError(f"transaction {transaction_id} fenced")
        return txn

    def add_partitions_to_transaction(
        self,
        transaction_id: int,
        producer_id: int,
        producer_generation: int,
        partitions: Iterable[TopicPartition],
    ) -> None:
        with self._lock:
            self._txn(transaction_id, producer_id, producer_generation)

    def send_offsets_to_transaction(
        self,
        transaction_id: int,
        producer_id: int,
        producer_generation: int,
        group_id: str,
        offsets: Mapping[TopicPartition, int],
        member: GroupMemberRef = OUTSIDE_ANY_GROUP,
    ) -> None:
        with self._lock:
            txn = self._txn(transaction_id, producer_id, producer_generation)
            txn.offsets.setdefault(group_id, {}).update(offsets)

    def commit_transaction(
        self,
        transaction_id: int,
        producer_id: int,
        producer_generation: int,
        wait_for_applied: bool = False,
        attempts: Iterable[str] | None = None,
        batches_written: Mapping[TopicPartition, int] | None = None,
    ) -> None:
        with self._lock:
            txn = self._txn(transaction_id, producer_id, producer_generation)
            if txn.state is TransactionState.COMMITTED:
                return
            if txn.state is not TransactionState.ONGOING:
                raise InvalidTxnStateError(f"transaction {transaction_id} is {txn.state.value}")
            for tp, batch in txn.batches:
                self._append(tp, batch)
            for group_id, offsets in txn.offsets.items():
                for tp, offset in offsets.items():
                    self.group_offsets[(group_id, tp)] = offset
            txn.state = TransactionState.COMMITTED

    def abort_transaction(
        self, transaction_id: int, producer_id: int, producer_generation: int
    ) -> None:
        with self._lock:
            txn = self._txn(transaction_id, producer_id, producer_generation)
            txn.state = TransactionState.ABORTED

    def fetch(
        self,
        topic: str,
        partition: int,
        offset: int,
        max_bytes: int = 1 << 20,
        max_wait_ms: int = 0,
        min_bytes: int = 1,
        current_leader_epoch: int = -1,
    ) -> FetchResult:
        with self._lock:
            tp = self._tp(topic, partition)
            if offset > self.ends[tp] or offset < 0:
                raise OffsetOutOfRangeError(
                    f"offset {offset} outside 0..{self.ends[tp]}", 0, self.ends[tp]
                )
            self._lock.wait_for(lambda: self.ends[tp] > offset, timeout=max_wait_ms / 1000)
            chunks: list[bytes] = []
            size = 0
            for batch in self.logs[tp]:
                header = RecordBatch(batch).header
                if header.next_offset <= offset:
                    continue
                if chunks and size + len(batch) > max_bytes:
                    break
                chunks.append(batch)
                size += len(batch)
            return FetchResult(b"".join(chunks), 0, self.ends[tp])

    def list_offset(self, topic: str, partition: int, spec: str | int) -> int:
        with self._lock:
            tp = self._tp(topic, partition)
            return self.starts.get(tp, 0) if spec == "earliest" else self.ends[tp]

    def delete_records(self, topic: str, partition: int, before_offset: int) -> int:
        """The log start only (this fake's fetch still reads from 0)."""
        with self._lock:
            tp = self._tp(topic, partition)
            end, start = self.ends[tp], self.starts.get(tp, 0)
            target = end if before_offset == -1 else before_offset
            if not 0 <= target <= end:
                raise OffsetOutOfRangeError(f"offset {before_offset} outside 0..{end}", start, end)
            self.starts[tp] = max(start, target)
            return self.starts[tp]

    # consumer groups: this fake has no members (tests of groups use the real broker)
    def group_heartbeat(self, call: object) -> object:
        raise InvalidConfigError("the fake broker has no group membership")

    def list_groups(self) -> list[object]:
        return []

    def describe_group(self, group_id: str) -> object:
        raise GroupIdNotFoundError(f"no group {group_id!r}")

    def delete_group(self, group_id: str) -> None:
        raise GroupIdNotFoundError(f"no group {group_id!r}")

    def delete_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, TwinlogError | None]:
        asked = [TopicPartition(*tp) for tp in partitions]
        with self._lock:
            if not any(group == group_id for group, _ in self.group_offsets):
                raise GroupIdNotFoundError(f"no group {group_id!r}")
            for tp in asked:
                self.group_offsets.pop((group_id, tp), None)
            return dict.fromkeys(asked)

    def commit_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, int],
        member: GroupMemberRef = OUTSIDE_ANY_GROUP,
    ) -> None:
        with self._lock:
            for tp, offset in offsets.items():
                self.group_offsets[(group_id, TopicPartition(*tp))] = offset

    def fetch_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]:
        with self._lock:
            return {
                TopicPartition(*tp): self.group_offsets.get((group_id, TopicPartition(*tp)), -1)
                for tp in partitions
            }

    def list_transactions(self) -> list[TransactionDescription]:
        with self._lock:
            return [
                TransactionDescription(
                    txn.transaction_id,
                    txn.transactional_id,
                    txn.producer_id,
                    txn.producer_generation,
                    txn.state,
                    tuple(sorted({tp for tp, _ in txn.batches})),
                    tuple(sorted(txn.offsets)),
                    0,
                    60_000,
                )
                for txn in self.transactions.values()
                if txn.state is TransactionState.ONGOING
            ]

    def admin_abort_transaction(self, transaction_id: int) -> None:
        with self._lock:
            txn = self.transactions.get(transaction_id)
            if txn is None or txn.state is not TransactionState.ONGOING:
                raise UnknownTransactionError(f"transaction {transaction_id} is not in flight")
            txn.state = TransactionState.ABORTED

    def transactional_id_of(self, producer_id: int) -> str | None:
        with self._lock:
            found = [tid for tid, (pid, _) in self.generations.items() if pid == producer_id]
            return found[0] if found else None

    def describe_producers(self, topic: str, partition: int) -> list[ProducerDescription]:
        with self._lock:
            tp = self._tp(topic, partition)
            return [
                ProducerDescription(pid, 0, expected - 1, 0, -1)
                for (pid, _, key_tp), expected in self.sequences.items()
                if key_tp == tp
            ]


@contextmanager
def fake_server(
    broker: FakeBroker | None = None, **config: object
) -> Iterator[tuple[FakeBroker, str]]:
    """An in-process server on a free loopback port over a FakeBroker: (broker, address)."""
    broker = broker or FakeBroker()
    settings = ServerConfig(port=0, **config)  # type: ignore[arg-type]
    server = RpcServer(broker, settings)
    server.start()
    try:
        yield broker, f"127.0.0.1:{server.port}"
    finally:
        server.stop(grace_ms=0)
