"""Producer batching, sequences and transaction rules, on an embedded fake broker (no network)."""

from __future__ import annotations

import logging
import random
import threading
import time

import pytest
from rpc_fakes import FakeBroker

from twinlog.engine.base.errors import (
    BatchTooLargeError,
    InvalidConfigError,
    InvalidTxnStateError,
    NotEnoughResourcesError,
    ProducerFencedError,
    RecordTooLargeError,
    TransactionDataMissingError,
)
from twinlog.engine.base.types import ProduceResult
from twinlog.engine.records.batch_reader import RecordBatch
from twinlog.rpc.client import Producer
from twinlog.rpc.client.partitioner import StickyPartitioner, partition_for_key

KIB = 1024


class RecordingBroker(FakeBroker):
    """Remembers each produced batch's (partition, record count, base sequence)."""

    def __init__(self, refuse_bytes_over: int | None = None) -> None:
        super().__init__()
        self.batches: list[tuple[int, int, int]] = []
        self.refuse_bytes_over = refuse_bytes_over

    def produce(
        self,
        topic: str,
        partition: int,
        batch: bytes,
        attempt: str = "",
        transaction_id: int = -1,
        current_leader_epoch: int = -1,
    ) -> ProduceResult:
        if self.refuse_bytes_over is not None and len(batch) > self.refuse_bytes_over:
            raise BatchTooLargeError(f"batch of {len(batch)} bytes; limit {self.refuse_bytes_over}")
        header = RecordBatch(batch).header
        self.batches.append((partition, header.record_count, header.base_sequence))
        return super().produce(topic, partition, batch, attempt, transaction_id)


def test_batches_fill_to_batch_bytes() -> None:
    broker = RecordingBroker()
    broker.create_topic("t", 1)
    with Producer(broker, linger_ms=10_000, batch_bytes=8 * KIB, compression="none") as producer:
        for _ in range(40):
            producer.send("t", b"x" * KIB, partition=0)
        producer.flush()
    counts = [count for _, count, _ in broker.batches]
    assert sum(counts) == 40
    assert max(counts) <= 8 and counts[0] >= 6, counts
    sequences = [sequence for _, _, sequence in broker.batches]
    assert sequences == [sum(counts[:i]) for i in range(len(counts))]


def test_linger_holds_a_lone_record() -> None:
    broker = RecordingBroker()
    broker.create_topic("t", 1)
    with Producer(broker, linger_ms=300) as producer:
        started = time.monotonic()
        future = producer.send("t", b"alone", partition=0)
        time.sleep(0.1)
        assert not future.done()
        metadata = future.result(timeout=5)
        assert time.monotonic() - started >= 0.29
        assert (metadata.partition, metadata.offset) == (0, 0)


def test_refused_batch_gives_back_its_sequences() -> None:
    broker = RecordingBroker(refuse_bytes_over=2 * KIB)
    broker.create_topic("t", 1)
    with Producer(broker, linger_ms=0, compression="none") as producer:
        too_big = producer.send("t", b"x" * (4 * KIB), partition=0)
        with pytest.raises(BatchTooLargeError):
            too_big.result(timeout=5)
        fine = producer.send("t", b"small", partition=0)
        assert fine.result(timeout=5).offset == 0  # not OutOfOrderSequenceError


def test_send_blocks_when_the_buffer_is_full_then_fails_clearly() -> None:
    gate = threading.Event()

    class StuckBroker(FakeBroker):
        def produce(
            self,
            topic: str,
            partition: int,
            batch: bytes,
            attempt: str = "",
            transaction_id: int = -1,
            current_leader_epoch: int = -1,
        ) -> ProduceResult:
            gate.wait(10)
            return super().produce(topic, partition, batch, attempt, transaction_id)

    broker = StuckBroker()
    broker.create_topic("t", 1)
    producer = Producer(
        broker, linger_ms=0, batch_bytes=4 * KIB, buffer_bytes_max=8 * KIB, max_block_ms=300
    )
    with pytest.raises(NotEnoughResourcesError, match="buffer_bytes_max"):
        for _ in range(100):
            producer.send("t", b"y" * KIB, partition=0)
    gate.set()
    producer.close()


def test_transaction_rules_and_hints() -> None:
    broker = FakeBroker()
    broker.create_topic("t", 2)
    producer = Producer(broker, transactional_id="rules")
    with pytest.raises(InvalidTxnStateError, match="init_transactions"):
        producer.begin_transaction()
    producer.init_transactions()
    with pytest.raises(InvalidTxnStateError, match="begin_transaction"):
        producer.send("t", b"outside", partition=0)
    transaction_id = producer.begin_transaction()
    assert producer.transaction_id == transaction_id
    with pytest.raises(InvalidTxnStateError, match="commit or abort"):
        producer.begin_transaction()
    producer.send("t", b"inside", partition=1).result(timeout=5)
    producer.send_offsets_to_transaction({("t", 0): 7}, "group")
    producer.commit_transaction()
    assert producer.transaction_id is None
    assert broker.group_offsets[("group", ("t", 0))] == 7
    idempotent = Producer(broker)
    with pytest.raises(InvalidTxnStateError, match="transactional_id"):
        idempotent.init_transactions()
    idempotent.close()
    producer.close()


def test_record_future_callback_and_metadata() -> None:
    broker = FakeBroker()
    broker.create_topic("t", 1)
    seen = []
    done = threading.Event()
    with Producer(broker, linger_ms=0) as producer:
        producer.send("t", b"a", partition=0).result(timeout=5)
        future = producer.send("t", b"b", partition=0, timestamp_ms=1234)
        future.add_done_callback(lambda f: (seen.append(f.result()), done.set()))
        assert done.wait(5)
    assert seen[0].offset == 1 and seen[0].timestamp_ms == 1234


def test_sticky_partitioner() -> None:
    partitioner = StickyPartitioner()
    first = partitioner.partition("t", None, 4)
    assert all(partitioner.partition("t", None, 4) == first for _ in range(10))
    partitioner.batch_closed("t", first, 4)
    assert partitioner.partition("t", None, 4) == (first + 1) % 4
    assert partitioner.partition("t", b"key", 4) == partition_for_key(b"key", 4)


def test_the_sticky_partitioner_leaves_the_random_modules_state_alone() -> None:
    """A producer's sender thread picks partitions; the shared ``random`` state is the
    application's (and Hypothesis's, which warns, an error here, if it changes)."""
    random.seed(11)
    state = random.getstate()
    picked = {StickyPartitioner().partition("t", None, 64) for _ in range(20)}
    assert random.getstate() == state
    assert len(picked) > 1  # still random


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"value": "text"}, r"value must be bytes or None, not str \(encode it first"),
        ({"value": b"v", "key": "k"}, r"key must be bytes or None, not str"),
        ({"value": b"v", "headers": [("h", "text")]}, r"headers\[0\] value must be bytes"),
        ({"value": b"v", "headers": [(b"h", b"v")]}, r"headers\[0\] name must be str"),
        ({"value": b"v", "headers": "h=v"}, r"headers must be a list of \(str, bytes\) pairs"),
        ({"value": b"v", "timestamp_ms": 1.5}, r"timestamp_ms must be an int"),
    ],
)
def test_wrong_types_are_refused_up_front_and_leave_nothing_behind(
    fields: dict[str, object], message: str, caplog: pytest.LogCaptureFixture
) -> None:
    broker = RecordingBroker()
    broker.create_topic("t", 1)
    with Producer(broker, linger_ms=0) as producer:
        with pytest.raises(TypeError, match=message):
            producer.send("t", partition=0, **fields)  # type: ignore[arg-type]
        assert producer._accumulator.is_empty()  # no empty or torn batch left queued
        fine = producer.send("t", bytearray(b"fine"), key=memoryview(b"k"), partition=0)
        producer.flush()
        assert fine.result(timeout=5).offset == 0
    assert broker.batches == [(0, 1, 0)]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_record_larger_than_max_batch_bytes_is_refused_before_it_is_queued() -> None:
    broker = RecordingBroker()
    broker.create_topic("t", 1)
    with Producer(
        broker, batch_bytes=4 * KIB, batch_bytes_max=16 * KIB, compression="none"
    ) as producer:
        with pytest.raises(RecordTooLargeError, match="batch_bytes_max=16384") as refused:
            producer.send("t", b"x" * (16 * KIB), partition=0)
        assert isinstance(refused.value, BatchTooLargeError)  # caught as either
        assert "batch_bytes" not in str(refused.value).replace("batch_bytes_max", "")
        # Larger than batch_bytes but within the limit: a batch of its own, as in Kafka.
        fits = producer.send("t", b"x" * (8 * KIB), partition=0)
        producer.flush()
        assert fits.result(timeout=5).offset == 0
    assert broker.produce_calls == 1
    with pytest.raises(InvalidConfigError, match="batch_bytes_max"):
        Producer(broker, batch_bytes=64 * KIB, batch_bytes_max=16 * KIB)


class MissingDataBroker(FakeBroker):
    """Refuses every commit as a broker that lost the transaction's journaled batches."""

    def commit_transaction(self, transaction_id: int, *args: object, **kwargs: object) -> None:
        raise TransactionDataMissingError(f"transaction {transaction_id}: no journaled batches")


def test_a_commit_refused_with_an_abortable_error_is_aborted_and_the_producer_lives() -> None:
    broker = MissingDataBroker()
    broker.create_topic("t", 1)
    with Producer(broker, transactional_id="abortable", linger_ms=0) as producer:
        producer.init_transactions()
        with pytest.raises(TransactionDataMissingError) as raised, producer.transaction():
            producer.send("t", b"lost")
        assert raised.value.abortable and raised.value.txn_requires_abort()
        assert producer.transaction_id is None  # transaction() aborted it
        assert [txn.state.value for txn in broker.transactions.values()] == ["ABORTED"]
        producer.begin_transaction()  # the producer lives on
        producer.abort_transaction()


def test_a_fatal_error_of_a_transaction_call_ends_the_generation() -> None:
    broker = FakeBroker()
    broker.create_topic("t", 1)
    with Producer(broker, transactional_id="fatal", linger_ms=0) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        Producer(broker, transactional_id="fatal").init_transactions()  # a newer generation
        with pytest.raises(ProducerFencedError) as fenced:
            producer.commit_transaction()
        assert fenced.value.fatal
        with pytest.raises(ProducerFencedError):
            producer.send("t", b"zombie")
    with pytest.raises(InvalidTxnStateError) as closed:
        producer.send("t", b"after close")
    assert closed.value.fatal
