"""End to end: the real broker in a ``twinlog serve`` subprocess, the Python client here.

One server for the module (each test uses its own topics); fencing uses a second
client process.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
from server_process import ROOT, ServerProcess, environment

from twinlog.engine.base.errors import (
    BatchTooLargeError,
    CorruptBatchError,
    InvalidConfigError,
    InvalidRequestError,
    InvalidTxnStateError,
    NotEnoughResourcesError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    PendingTransactionError,
    ProducerFencedError,
    TopicExistsError,
    TwinlogError,
    UnknownProducerIdError,
    UnknownTopicOrPartitionError,
    UnknownTransactionError,
)
from twinlog.engine.base.types import TopicPartition, TransactionState
from twinlog.engine.records.batch_builder import RecordBatchBuilder, build_batch
from twinlog.rpc.client import Admin, Consumer, Producer
from twinlog.rpc.client.produce_stream import BatchToSend
from twinlog.rpc.client.remote import RemoteBroker
from twinlog.rpc.generated.twinlog.v1 import produce_pb2

pytestmark = [pytest.mark.slow]

MAX_BATCH_BYTES = 256 * 1024


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    directory = tmp_path_factory.mktemp("e2e")
    with ServerProcess(
        directory / "data",
        "--config",
        f"batch_bytes_max={MAX_BATCH_BYTES}",
        "--config",
        "open_transactions_max=8",
        "--config",
        "transaction_check_interval_ms=100",
    ) as process:
        yield process
        assert process.stop() == 0, process.log()


@pytest.fixture(scope="module")
def admin(server: ServerProcess) -> Iterator[Admin]:
    with Admin(server.address) as client:
        yield client


@pytest.fixture(scope="module")
def remote(server: ServerProcess) -> Iterator[RemoteBroker]:
    with RemoteBroker(server.address) as client:
        yield client


def read(address: str, topic: str, partitions: int, count: int, timeout_s: float = 10) -> list:
    with Consumer(address) as consumer:
        consumer.assign([(topic, p) for p in range(partitions)])
        consumer.seek_to_beginning()
        records: list = []
        deadline = time.monotonic() + timeout_s
        while len(records) < count and time.monotonic() < deadline:
            records.extend(consumer.poll(timeout_ms=200))
        records.extend(consumer.poll(timeout_ms=100))  # nothing more must come
        return records


def test_produce_consume_round_trip(server: ServerProcess, admin: Admin) -> None:
    admin.create_topic("round-trip", 3)
    with Producer(server.address, linger_ms=2, batch_bytes=4096) as producer:
        futures = [
            producer.send("round-trip", f"value-{i}".encode(), key=f"key-{i % 5}".encode())
            for i in range(300)
        ]
        producer.flush()
        metadata = [future.result(timeout=10) for future in futures]
    records = read(server.address, "round-trip", 3, 300)
    assert len(records) == 300
    by_partition: dict[int, list[bytes]] = {}
    for record in records:
        by_partition.setdefault(record.partition, []).append(record.value)
    for partition, values in by_partition.items():
        sent = [f"value-{i}".encode() for i, m in enumerate(metadata) if m.partition == partition]
        assert values == sent
    offsets = {(m.partition, m.offset) for m in metadata}
    assert offsets == {(r.partition, r.offset) for r in records}
    description = admin.describe_topic("round-trip")
    assert sum(p.log_end_offset for p in description.partitions) == 300


def test_transactions_over_partitions(server: ServerProcess, admin: Admin) -> None:
    admin.create_topic("txn-multi", 4)
    with Producer(server.address, transactional_id="e2e-multi") as producer:
        producer.init_transactions()
        for number in range(3):
            with producer.transaction():
                for partition in range(4):
                    producer.send(
                        "txn-multi", f"c{number}-{partition}".encode(), partition=partition
                    )
        producer.begin_transaction()
        for partition in range(4):
            producer.send("txn-multi", b"aborted", partition=partition)
        producer.flush()
        pending = admin.describe_topic("txn-multi")
        assert sum(p.journal_entries_pending for p in pending.partitions) >= 4
        open_ones = [t for t in admin.list_transactions() if t.transactional_id == "e2e-multi"]
        assert [t.state for t in open_ones] == [TransactionState.ONGOING]
        assert len(open_ones[0].partitions) == 4
        producer.abort_transaction()
    records = read(server.address, "txn-multi", 4, 12)
    assert sorted(r.value for r in records) == sorted(
        f"c{n}-{p}".encode() for n in range(3) for p in range(4)
    )
    for partition in range(4):
        values = [r.value for r in records if r.partition == partition]
        assert values == [f"c{n}-{partition}".encode() for n in range(3)]


FENCED_CLIENT = """
import sys
from twinlog.rpc.client import Producer
from twinlog.engine.base.errors import ProducerFencedError
producer = Producer(sys.argv[1], transactional_id="e2e-fence")
producer.init_transactions()
producer.begin_transaction()
producer.send("fence", b"from the zombie", partition=0)
producer.flush()
print("began", flush=True)
sys.stdin.readline()
try:
    producer.send("fence", b"after fencing", partition=0).result(timeout=10)
    producer.commit_transaction()
    print("committed", flush=True)
except ProducerFencedError as error:
    print("fenced:", error, flush=True)
"""


def test_fencing_across_two_processes(server: ServerProcess, admin: Admin) -> None:
    admin.create_topic("fence", 1)
    with subprocess.Popen(  # its pipes closed and it reaped, whatever the test saw
        [sys.executable, "-c", FENCED_CLIENT, server.address],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=environment(),
    ) as zombie:
        try:
            assert zombie.stdin is not None and zombie.stdout is not None
            assert zombie.stdout.readline().strip() == "began"
            with Producer(server.address, transactional_id="e2e-fence") as successor:
                successor.init_transactions()
                zombie.stdin.write("go\n")
                zombie.stdin.flush()
                answer = zombie.stdout.readline()
                zombie.wait(timeout=30)
                assert answer.startswith("fenced:"), answer
                with successor.transaction():
                    successor.send("fence", b"from the successor", partition=0)
        finally:
            if zombie.poll() is None:
                zombie.kill()
    assert [r.value for r in read(server.address, "fence", 1, 1)] == [b"from the successor"]


def test_long_poll_wakes_up(server: ServerProcess, admin: Admin, remote: RemoteBroker) -> None:
    admin.create_topic("long-poll", 1)

    def produce_later() -> None:
        time.sleep(0.5)
        remote.produce("long-poll", 0, build_batch([b"wake up"]))

    thread = threading.Thread(target=produce_later)
    started = time.monotonic()
    thread.start()
    result = remote.fetch("long-poll", 0, 0, max_wait_ms=10_000)
    elapsed = time.monotonic() - started
    thread.join()
    assert result.records
    assert 0.4 < elapsed < 3.0, f"long poll answered after {elapsed:.2f} s"
    started = time.monotonic()
    empty = remote.fetch("long-poll", 0, 1, max_wait_ms=300)
    assert not empty.records and 0.25 < time.monotonic() - started < 3.0


def _idempotent_batch(producer_id: int, base_sequence: int, values: list[bytes]) -> bytes:
    builder = RecordBatchBuilder(
        "none", producer_id=producer_id, producer_generation=0, base_sequence=base_sequence
    )
    for value in values:
        builder.append(value)
    return builder.build()


def test_error_mapping(server: ServerProcess, admin: Admin, remote: RemoteBroker) -> None:
    """Each engine error a client can provoke arrives as its own class, with a useful message."""
    admin.create_topic("errors", 1)
    with pytest.raises(TopicExistsError):
        admin.create_topic("errors", 1)
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.describe_topic("no-such-topic")
    with pytest.raises(UnknownTopicOrPartitionError):
        remote.produce("errors", 7, build_batch([b"x"]))
    with pytest.raises(InvalidConfigError):
        admin.create_topic("bad-config", 1, {"segment.bytes": "not a number"})
    with pytest.raises(OffsetOutOfRangeError) as out_of_range:
        remote.fetch("errors", 0, 1_000)
    assert out_of_range.value.log_end_offset == 0
    corrupt = bytearray(build_batch([b"payload"], compression="none"))
    corrupt[-2] ^= 0x01
    with pytest.raises(CorruptBatchError):
        remote.produce("errors", 0, bytes(corrupt))
    # serve's --config batch_bytes_max is the broker's limit, the default of every topic's
    with pytest.raises(
        BatchTooLargeError, match=rf"topic's limit of {MAX_BATCH_BYTES} bytes.*batch_bytes_max"
    ):
        remote.produce("errors", 0, build_batch([b"x" * (MAX_BATCH_BYTES + 1)], compression="none"))
    with pytest.raises(BatchTooLargeError, match="request_bytes_max"):
        remote.produce("errors", 0, bytes(17 << 20))  # the server's default limit is 16 MiB
    # sequences
    identity = remote.init_producer()
    first = _idempotent_batch(identity.producer_id, 0, [b"a", b"b"])
    assert not remote.produce("errors", 0, first).duplicate
    assert remote.produce("errors", 0, first).duplicate
    with pytest.raises(OutOfOrderSequenceError):
        remote.produce("errors", 0, _idempotent_batch(identity.producer_id, 5, [b"gap"]))
    # transactions
    with pytest.raises(UnknownProducerIdError):
        remote.begin_transaction(123_456_789 << 8, 0)
    with pytest.raises(UnknownTransactionError):
        admin.abort_transaction(987_654_321 << 8)
    old = remote.init_producer("e2e-errors")
    transaction_id = remote.begin_transaction(old.producer_id, old.producer_generation, 1)
    assert remote.begin_transaction(old.producer_id, old.producer_generation, 1) == transaction_id
    with pytest.raises(InvalidTxnStateError, match="already has transaction"):
        remote.begin_transaction(old.producer_id, old.producer_generation, 2)
    tp = TopicPartition("errors", 0)
    remote.send_offsets_to_transaction(
        transaction_id, old.producer_id, old.producer_generation, "g-errors", {tp: 1}
    )
    with pytest.raises(PendingTransactionError) as pending:
        remote.fetch_offsets("g-errors", [tp])
    assert pending.value.retriable
    new = remote.init_producer("e2e-errors")
    assert new.producer_generation == old.producer_generation + 1
    with pytest.raises(ProducerFencedError) as fenced:
        remote.commit_transaction(transaction_id, old.producer_id, old.producer_generation)
    assert not fenced.value.retriable
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # the fenced transaction's abort completes
        try:
            assert remote.fetch_offsets("g-errors", [tp]) == {tp: -1}
            break
        except PendingTransactionError:
            time.sleep(0.05)


def test_open_transaction_limit(server: ServerProcess, remote: RemoteBroker) -> None:
    """open_transactions_max=8 on this server: the ninth gets a clear, retriable error."""
    opened = []
    with pytest.raises(NotEnoughResourcesError, match="open_transactions_max") as caught:
        for index in range(20):
            identity = remote.init_producer(f"e2e-limit-{index}")
            transaction_id = remote.begin_transaction(
                identity.producer_id, identity.producer_generation
            )
            opened.append((transaction_id, identity))
    assert caught.value.retriable
    assert len(opened) <= 8
    for transaction_id, identity in opened:
        remote.abort_transaction(transaction_id, identity.producer_id, identity.producer_generation)


def test_consumer_group_offsets(server: ServerProcess, admin: Admin) -> None:
    admin.create_topic("groups", 2)
    with Producer(server.address) as producer:
        for i in range(10):
            producer.send("groups", f"{i}".encode(), partition=i % 2)
    with Consumer(server.address, group_id="e2e-group", auto_offset_reset="earliest") as consumer:
        consumer.assign([("groups", 0), ("groups", 1)])
        seen: list = []
        deadline = time.monotonic() + 10
        while len(seen) < 10 and time.monotonic() < deadline:
            seen.extend(consumer.poll(200))
        assert len(seen) == 10
        consumer.commit()
        committed = consumer.committed([("groups", 0), ("groups", 1)])
        assert committed == {TopicPartition("groups", 0): 5, TopicPartition("groups", 1): 5}


def test_client_error_is_engine_class(server: ServerProcess) -> None:
    """A caught error is the engine's own class, so embedded and remote code catch the same."""
    with Admin(server.address) as admin:
        try:
            admin.describe_topic("missing")
        except TwinlogError as error:
            assert type(error) is UnknownTopicOrPartitionError
            assert "create" in str(error).lower() or "missing" in str(error)


def test_a_flush_goes_as_one_request_and_unary_produce_refuses_more(
    server: ServerProcess, admin: Admin, remote: RemoteBroker
) -> None:
    """A pipe's batches for several partitions travel in one ProduceStream request (its
    ``more``), each answered in its place; a unary Produce carrying ``more`` is refused
    whole, with nothing written."""
    admin.create_topic("flushed", 3)
    unary = produce_pb2.ProduceRequest(topic="flushed", partition=0, batch=build_batch([b"u0"]))
    unary.more.add(topic="flushed", partition=1, batch=build_batch([b"u1"]))
    with pytest.raises(InvalidRequestError, match="ProduceStream only"):
        remote._call(remote.producing.Produce, unary)
    assert [remote.fetch("flushed", p, 0).log_end_offset for p in range(3)] == [0, 0, 0]
    pipe = remote.open_produce_stream()
    try:
        futures = pipe.submit_all(
            [
                BatchToSend("flushed", 0, build_batch([b"a", b"b"])),
                BatchToSend("no-such-topic", 0, build_batch([b"lost"])),
                BatchToSend("flushed", 1, build_batch([b"c"])),
                BatchToSend("flushed", 2, build_batch([b"d"])),
            ]
        )
        assert futures[0].result(timeout=10).base_offset == 0
        assert isinstance(futures[1].exception(timeout=10), UnknownTopicOrPartitionError)
        assert [f.result(timeout=10).base_offset for f in futures[2:]] == [0, 0]
    finally:
        pipe.close()
    values = sorted(r.value for r in read(server.address, "flushed", 3, 4))
    assert values == [b"a", b"b", b"c", b"d"]
