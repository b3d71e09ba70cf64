"""The embedded broker end to end: real data logs, real LMDB journal, real transaction journals."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_support import batch
from cluster_support import wait_for

from twinlog.engine.base.errors import (
    BatchTooLargeError,
    CorruptBatchError,
    InvalidConfigError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    PendingTransactionError,
    ProducerFencedError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from twinlog.engine.base.types import TopicPartition, TransactionState
from twinlog.engine.broker.broker import Broker
from twinlog.engine.records.batch_builder import build_batch
from twinlog.engine.records.batch_reader import iter_batches
from twinlog.journal import CopyState


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with Broker.open(tmp_path / "data", transaction_check_interval_ms=50) as opened:
        opened.create_topic("orders", partitions=3)
        opened.create_topic("audit", partitions=1)
        yield opened


def read_all(broker: Broker, topic: str, partition: int) -> list[bytes | None]:
    result = broker.fetch(topic, partition, 0, max_bytes=1 << 30)
    return [r.value for b in iter_batches(result.records) for r in b.records()]


class Txn:
    """A tiny transactional producer over the embedded broker (the real client lives in rpc/)."""

    def __init__(
        self, broker: Broker, transactional_id: str, timeout_ms: int | None = None
    ) -> None:
        self.broker = broker
        self.identity = broker.init_producer(transactional_id, timeout_ms)
        self.sequences: dict[TopicPartition, int] = {}
        self.transaction_id = -1

    def begin(self) -> int:
        self.transaction_id = self.broker.begin_transaction(
            self.identity.producer_id, self.identity.producer_generation
        )
        self.sequences = {}
        return self.transaction_id

    def send(self, topic: str, partition: int, values: list[bytes]) -> None:
        tp = TopicPartition(topic, partition)
        sequence = self.sequences.get(tp, 0)
        self.broker.produce(
            topic,
            partition,
            batch(values, self.identity, sequence, self.transaction_id),
            transaction_id=self.transaction_id,
        )
        self.sequences[tp] = sequence + len(values)

    def send_offsets(self, group_id: str, offsets: dict[TopicPartition, int]) -> None:
        self.broker.send_offsets_to_transaction(
            self.transaction_id,
            self.identity.producer_id,
            self.identity.producer_generation,
            group_id,
            offsets,
        )

    def commit(self) -> None:
        self.broker.commit_transaction(
            self.transaction_id,
            self.identity.producer_id,
            self.identity.producer_generation,
            wait_for_applied=True,
        )

    def abort(self) -> None:
        self.broker.abort_transaction(
            self.transaction_id,
            self.identity.producer_id,
            self.identity.producer_generation,
            wait_for_applied=True,
        )


def test_plain_produce_and_fetch(broker: Broker) -> None:
    assert broker.produce("orders", 0, batch([b"a", b"b"])).base_offset == 0
    assert broker.produce("orders", 0, batch([b"c"])).base_offset == 2
    assert read_all(broker, "orders", 0) == [b"a", b"b", b"c"]
    assert broker.list_offset("orders", 0, "latest") == 3


def test_idempotent_retry_is_acknowledged_once_and_gap_refused(broker: Broker) -> None:
    identity = broker.init_producer()
    first = broker.produce("orders", 1, batch([b"x", b"y"], identity, 0))
    retry = broker.produce("orders", 1, batch([b"x", b"y"], identity, 0))
    assert retry.duplicate and retry.base_offset == first.base_offset
    with pytest.raises(OutOfOrderSequenceError, match="expected 2"):
        broker.produce("orders", 1, batch([b"z"], identity, 5))
    assert read_all(broker, "orders", 1) == [b"x", b"y"]


def test_a_first_batch_that_skips_sequences_is_refused(broker: Broker) -> None:
    """A producer's sequences start at 0 on each partition (per transaction when
    transactional). A first batch at 5 means batches 0..4 were lost: accepting it would let
    the lost batch's retry pass as a duplicate, and the transaction commit without it."""
    plain = broker.init_producer()
    with pytest.raises(OutOfOrderSequenceError, match=r"0\.\.6 never arrived"):
        broker.produce("orders", 0, batch([b"p"], plain, 7))
    txn = Txn(broker, "gappy")
    txn.begin()
    with pytest.raises(OutOfOrderSequenceError, match=r"0\.\.4 never arrived"):
        broker.produce(
            "orders",
            0,
            batch([b"x"], txn.identity, 5, txn.transaction_id),
            transaction_id=txn.transaction_id,
        )
    txn.send("orders", 0, [b"a", b"b"])  # from 0: accepted
    txn.commit()
    assert read_all(broker, "orders", 0) == [b"a", b"b"]


def test_transaction_is_invisible_until_applied_then_whole(broker: Broker) -> None:
    producer = Txn(broker, "app")
    producer.begin()
    producer.send("orders", 0, [b"o1", b"o2"])
    producer.send("orders", 2, [b"o3"])
    producer.send("audit", 0, [b"a1"])
    broker.produce("orders", 0, batch([b"plain"]))
    assert read_all(broker, "orders", 0) == [b"plain"]
    assert broker.describe_topic("orders").partitions[0].journal_entries_pending == 1
    producer.commit()
    assert read_all(broker, "orders", 0) == [b"plain", b"o1", b"o2"]
    assert read_all(broker, "orders", 2) == [b"o3"]
    assert read_all(broker, "audit", 0) == [b"a1"]
    # The entries go with MARK_APPLIED, which waits for a next copy group on the
    # partition; with none, the broker's background round writes it within about 50 ms.
    wait_for(
        "the applied entries to leave the journal",
        lambda: broker.describe_topic("orders").partitions[0].journal_entries_pending == 0,
    )
    assert broker.list_transactions() == []


def test_aborted_transaction_never_appears(broker: Broker) -> None:
    producer = Txn(broker, "app")
    producer.begin()
    producer.send("orders", 0, [b"never"])
    producer.abort()
    producer.begin()
    producer.send("orders", 0, [b"kept"])
    producer.commit()
    assert read_all(broker, "orders", 0) == [b"kept"]


def test_retried_transactional_batch_is_not_journaled_twice(broker: Broker) -> None:
    producer = Txn(broker, "app")
    txn_id = producer.begin()
    data = batch([b"once"], producer.identity, 0, txn_id)
    broker.produce("orders", 0, data)
    assert broker.produce("orders", 0, data).duplicate
    producer.commit()
    assert read_all(broker, "orders", 0) == [b"once"]


def test_fenced_producer_cannot_commit_and_its_data_never_appears(broker: Broker) -> None:
    zombie = Txn(broker, "app")
    zombie.begin()
    zombie.send("orders", 0, [b"zombie"])
    successor = Txn(broker, "app")
    with pytest.raises(ProducerFencedError):
        zombie.commit()
    with pytest.raises(ProducerFencedError):
        zombie.send("orders", 0, [b"late"])
    successor.begin()
    successor.send("orders", 0, [b"fresh"])
    successor.commit()
    assert read_all(broker, "orders", 0) == [b"fresh"]


def test_timed_out_transaction_is_aborted_and_refuses_late_writes(broker: Broker) -> None:
    producer = Txn(broker, "slow", timeout_ms=1_000)
    txn_id = producer.begin()
    producer.send("orders", 0, [b"too slow"])
    started = broker.list_transactions()[0].started_ms
    assert broker.expire_transactions(now=started + 1_001) == [txn_id]
    # Refused whether the abort is still being applied (PREPARE_ABORT) or done (ABORTED).
    with pytest.raises(InvalidTxnStateError, match="ABORT"):
        producer.send("orders", 0, [b"later"])
    with pytest.raises(InvalidTxnStateError, match="ABORT"):
        producer.commit()
    deadline = time.monotonic() + 5
    while broker.list_transactions():  # the abort is applied in the background
        assert time.monotonic() < deadline, "the timed-out transaction was never aborted"
        time.sleep(0.01)
    assert read_all(broker, "orders", 0) == []
    assert broker.describe_topic("orders").partitions[0].journal_entries_pending == 0


def test_offsets_in_transaction_are_pending_then_visible(broker: Broker) -> None:
    tp = TopicPartition("orders", 0)
    broker.commit_offsets("group", {tp: 5})
    producer = Txn(broker, "rpw")
    producer.begin()
    producer.send("audit", 0, [b"out"])
    producer.send_offsets("group", {tp: 9})
    with pytest.raises(PendingTransactionError):
        broker.fetch_offsets("group", [tp])
    producer.commit()
    assert broker.fetch_offsets("group", [tp]) == {tp: 9}
    producer.begin()
    broker.send_offsets_to_transaction(
        producer.transaction_id,
        producer.identity.producer_id,
        producer.identity.producer_generation,
        "group",
        {tp: 20},
    )
    producer.abort()
    broker.list_transactions()
    assert broker.fetch_offsets("group", [tp]) == {tp: 9}


def test_an_offsets_partition_records_applied_before_the_commit_completes(
    broker: Broker,
) -> None:
    """Not left for a next copy group: a new leader of the offsets partition would read an
    APPLYING transaction's offsets as pending, and nothing would settle them again."""
    producer = Txn(broker, "rpw")
    producer.begin()
    producer.send("audit", 0, [b"out"])
    producer.send_offsets("group", {TopicPartition("orders", 0): 9})
    producer.commit()
    offsets_partition = broker.group_coordinators.coordinator_of("group")
    row = broker.journal.transaction(offsets_partition.name, producer.transaction_id)
    assert row is not None and row.state is CopyState.APPLIED


def test_group_fencing_aborts_the_older_holder(broker: Broker) -> None:
    tp = TopicPartition("orders", 1)
    old = Txn(broker, "instance-a")
    old.begin()
    old.send("audit", 0, [b"from a"])
    broker.send_offsets_to_transaction(
        old.transaction_id, old.identity.producer_id, old.identity.producer_generation, "g", {tp: 3}
    )
    new = Txn(broker, "instance-b")
    new.begin()
    broker.send_offsets_to_transaction(
        new.transaction_id, new.identity.producer_id, new.identity.producer_generation, "g", {tp: 4}
    )
    with pytest.raises(InvalidTxnStateError, match="ABORTED"):
        old.commit()
    new.commit()
    assert broker.fetch_offsets("g", [tp]) == {tp: 4}
    assert read_all(broker, "audit", 0) == []


def test_offsets_survive_restart(tmp_path: Path) -> None:
    tp = TopicPartition("orders", 0)
    with Broker.open(tmp_path) as first:
        first.create_topic("orders")
        first.commit_offsets("g", {tp: 42})
    with Broker.open(tmp_path) as second:
        assert second.fetch_offsets("g", [tp]) == {tp: 42}


def test_ongoing_transaction_survives_restart_and_commits(tmp_path: Path) -> None:
    with Broker.open(tmp_path) as first:
        first.create_topic("orders")
        producer = Txn(first, "app")
        producer.begin()
        producer.send("orders", 0, [b"before restart"])
    with Broker.open(tmp_path) as second:
        (described,) = second.list_transactions()
        assert described.state is TransactionState.ONGOING
        producer.broker = second
        producer.send("orders", 0, [b"after restart"])
        producer.commit()
        assert read_all(second, "orders", 0) == [b"before restart", b"after restart"]


def test_bad_input_is_refused_with_typed_errors(broker: Broker) -> None:
    with pytest.raises(UnknownTopicOrPartitionError, match="create it first"):
        broker.produce("nope", 0, batch([b"x"]))
    with pytest.raises(UnknownTopicOrPartitionError, match=r"partitions 0\.\.2"):
        broker.produce("orders", 7, batch([b"x"]))
    corrupt = bytearray(batch([b"x"]))
    corrupt[-1] ^= 1
    with pytest.raises(CorruptBatchError, match="CRC"):
        broker.produce("orders", 0, bytes(corrupt))
    with pytest.raises(BatchTooLargeError, match="batch_bytes_max"):
        broker.produce("orders", 0, build_batch([b"x" * (9 << 20)], "none"))
    with pytest.raises(TopicExistsError):
        broker.create_topic("orders")
    assert read_all(broker, "orders", 0) == []


def test_a_transaction_begun_while_the_low_watermark_is_taken_is_not_purged(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The journal purge drops everything below the broker's low watermark. A begin that
    races with computing it (here: it runs when the next id is read) must stay above it,
    or its acknowledged batches are purged and its commit applies nothing."""
    producer = Txn(broker, "racer")
    peek = broker.ids.peek

    def peek_while_a_producer_begins(kind: str) -> int:
        monkeypatch.setattr(broker.ids, "peek", peek)
        producer.begin()
        producer.send("orders", 0, [b"acknowledged-1", b"acknowledged-2"])
        return peek(kind)

    monkeypatch.setattr(broker.ids, "peek", peek_while_a_producer_begins)
    watermark = broker.low_watermark()
    assert producer.transaction_id >= 0
    assert watermark <= producer.transaction_id
    assert broker.journal.purge_below(watermark) == 0
    producer.send("orders", 0, [b"acknowledged-3"])
    producer.commit()
    assert read_all(broker, "orders", 0) == [
        b"acknowledged-1",
        b"acknowledged-2",
        b"acknowledged-3",
    ]


def test_an_older_generation_cannot_begin_while_it_is_being_fenced(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """init_producer aborts the older generation's open transaction and waits for it; a begin
    of that generation in the meantime must be fenced, not left open to block the newcomer."""
    old = Txn(broker, "app")
    old.begin()
    old.send("orders", 0, [b"old-1"])
    coordinator = broker.coordinator_manager.for_transactional_id("app")
    wait_complete = coordinator._wait_complete
    zombie_begin: list[BaseException] = []

    def wait_then_let_the_zombie_begin(txn: object) -> None:
        wait_complete(txn)  # type: ignore[arg-type]
        try:
            old.begin()
        except ProducerFencedError as error:
            zombie_begin.append(error)

    monkeypatch.setattr(coordinator, "_wait_complete", wait_then_let_the_zombie_begin)
    newcomer = Txn(broker, "app")
    monkeypatch.setattr(coordinator, "_wait_complete", wait_complete)
    assert len(zombie_begin) == 1, "the older generation's begin was accepted"
    assert "re-initialised" in str(zombie_begin[0])
    assert broker.list_transactions() == []
    newcomer.begin()
    newcomer.send("orders", 0, [b"new-1"])
    newcomer.commit()
    assert read_all(broker, "orders", 0) == [b"new-1"]
    with pytest.raises(ProducerFencedError):
        old.begin()


def test_a_hanging_transaction_is_described_after_a_restart(tmp_path: Path) -> None:
    """KIP-664: describing a partition's producers must show an open transaction that has
    not sent since the broker restarted (its sequence trackers are built lazily)."""
    with Broker.open(tmp_path) as first:
        first.create_topic("orders")
        hanging = Txn(first, "hanging")
        hanging.begin()
        hanging.send("orders", 0, [b"a", b"b"])
        (before,) = first.describe_producers("orders", 0)
    with Broker.open(tmp_path) as second:
        (after,) = second.describe_producers("orders", 0)
        assert after == before
        assert after.current_transaction_id == hanging.transaction_id
        assert after.last_sequence == 1
        hanging.broker = second
        hanging.send("orders", 0, [b"c"])  # the send path's own tracker takes over
        (sent,) = second.describe_producers("orders", 0)
        assert sent.last_sequence == 2


def test_two_newcomers_racing_for_a_groups_offsets_leave_one_holder(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fencing and taking the offsets are one step: of two transactions committing a group's
    offsets at once, the one begun later keeps them and the earlier one is fenced (refused,
    or aborted), never both committing them."""
    import threading

    tp = TopicPartition("orders", 0)
    holder, older, newer = Txn(broker, "h"), Txn(broker, "n1"), Txn(broker, "n2")
    for txn in (holder, older, newer):
        txn.begin()

    def send_offsets(txn: Txn, offset: int) -> None:
        broker.send_offsets_to_transaction(
            txn.transaction_id,
            txn.identity.producer_id,
            txn.identity.producer_generation,
            "g",
            {tp: offset},
        )

    send_offsets(holder, 1)
    fence = broker.offset_fence.fence_holders
    both_fenced = threading.Barrier(2)

    def fence_then_wait_for_the_other(*args: object) -> None:
        fence(*args)  # type: ignore[arg-type]
        try:  # unlocked, both would pass the fence here before either takes the offsets
            both_fenced.wait(timeout=1.0)
        except threading.BrokenBarrierError:
            pass

    monkeypatch.setattr(broker.offset_fence, "fence_holders", fence_then_wait_for_the_other)
    errors: dict[str, BaseException] = {}

    def run(name: str, txn: Txn, offset: int) -> None:
        try:
            send_offsets(txn, offset)
        except ProducerFencedError as error:
            errors[name] = error

    threads = [
        threading.Thread(target=run, args=("older", older, 2)),
        threading.Thread(target=run, args=("newer", newer, 3)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert "newer" not in errors
    newer.commit()
    if "older" not in errors:  # it took the offsets first, then the newer one aborted it
        with pytest.raises(InvalidTxnStateError):
            older.commit()
    assert broker.fetch_offsets("g", [tp]) == {tp: 3}


def test_the_transaction_timeout_limit_is_the_brokers_setting(tmp_path: Path) -> None:
    """``transaction_timeout_ms_max`` above the 15-minute default is honoured end to end
    (the coordinator once refused what the broker's setting allowed), and a timeout
    above the setting is refused with the setting named."""
    hour_ms = 3_600_000
    with Broker.open(tmp_path / "long", transaction_timeout_ms_max=hour_ms) as long_broker:
        assert long_broker.init_producer("nightly-batch", hour_ms).producer_generation == 0
    with Broker.open(tmp_path / "default") as default_broker:
        with pytest.raises(InvalidConfigError, match="transaction_timeout_ms_max"):
            default_broker.init_producer("nightly-batch", hour_ms)


def test_marks_left_at_a_close_are_recorded_after_the_restart_without_a_write(
    tmp_path: Path,
) -> None:
    with Broker.open(tmp_path) as first:
        first.create_topic("orders")
        producer = Txn(first, "app")
        producer.begin()
        producer.send("orders", 0, [b"kept"])
        producer.commit()  # closed at once: its MARK_APPLIED is left for the next leader
        left = first.describe_topic("orders").partitions[0].journal_entries_pending
    with Broker.open(tmp_path) as second:
        # No write comes to the partition: the restarted leader's recovery runs anyway.
        wait_for(
            "the restarted leader to record the whole copy APPLIED",
            lambda: second.describe_topic("orders").partitions[0].journal_entries_pending == 0,
        )
        assert read_all(second, "orders", 0) == [b"kept"]
    assert left == 1  # else the close wrote the mark, and this test shows nothing
