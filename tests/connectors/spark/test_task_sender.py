"""The write task's sender without Spark: the columnar paths (value only; value and key)
send the records the row-by-row path would, batches reach the broker in sequence order
from the in-order sender's thread, and a failed produce surfaces in the task."""

from __future__ import annotations

import dataclasses
import threading
import time
from types import SimpleNamespace
from typing import Any

import pyarrow
import pytest

from twinlog.connectors.spark.in_order_sender import InOrderSender
from twinlog.connectors.spark.options import Connection
from twinlog.connectors.spark.task_sender import TaskSender
from twinlog.connectors.spark.transaction import TransactionTicket
from twinlog.connectors.spark.write_settings import WriteSettings
from twinlog.engine.base.errors import InvalidRecordError
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.records.batch_format import RECORDS_OFFSET, read_header
from twinlog.engine.records.record_decoder import decode_records
from twinlog.rpc.client.connection_options import ConnectionOptions
from twinlog.rpc.client.partitioner import partition_for_key

PARTITIONS = 3


class RecordingBroker:
    """Answers describe_topic; keeps every produced batch, slowly, as a disk would."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.produced: list[tuple[str, int, bytes]] = []
        self.threads: set[str] = set()
        self.fail_at = fail_at

    def describe_topic(self, topic: str) -> Any:
        return SimpleNamespace(partitions=list(range(PARTITIONS)))

    def produce(self, topic: str, partition: int, batch: bytes, **_: Any) -> None:
        self.threads.add(threading.current_thread().name)
        if self.fail_at is not None and len(self.produced) == self.fail_at:
            raise InvalidRecordError("refused for the test")
        time.sleep(0.001)
        self.produced.append((topic, partition, batch))

    def records(self) -> dict[int, list[tuple[bytes | None, bytes | None]]]:
        found: dict[int, list[tuple[bytes | None, bytes | None]]] = {}
        sequences: dict[int, int] = {}
        for _, partition, batch in self.produced:
            header = read_header(batch)
            assert header.base_sequence == sequences.get(partition, 0)  # in order, no gaps
            sequences[partition] = header.base_sequence + header.record_count
            columns = decode_records(batch[RECORDS_OFFSET:], header)
            found.setdefault(partition, []).extend(zip(columns.keys, columns.values, strict=True))
        return found


def _sender(broker: RecordingBroker, columns: tuple[str, ...], batch_bytes: int) -> TaskSender:
    settings = WriteSettings(
        connection=Connection("127.0.0.1:1", None, ConnectionOptions()),
        topic="rows",
        columns=columns,
        transaction_timeout_ms=60_000,
        batch_bytes=batch_bytes,
        compression="none",
        sink_id=None,
    )
    ticket = TransactionTicket("app", producer_id=7, producer_generation=0, transaction_id=3)
    return TaskSender(broker, settings, ticket, "attempt-1", first_partition=1)  # type: ignore[arg-type]


def test_value_only_rows_fill_one_partition_at_a_time_in_order() -> None:
    values = [b"%05d" % i * 100 for i in range(500)]  # 500 B each
    broker = RecordingBroker()
    with _sender(broker, ("value",), batch_bytes=20_000) as sender:
        for start in range(0, 500, 128):  # Arrow batches of 128 rows
            chunk = pyarrow.RecordBatch.from_pydict({"value": values[start : start + 128]})
            sender.send_arrow([chunk])
        report = sender.finish()
    assert report.records == 500 and report.batches == len(broker.produced)
    assert broker.threads == {"twinlog-task-sender"}
    # Sticky: batch after batch, each to the next partition, starting at first_partition.
    assert [p for _, p, _ in broker.produced][:4] == [1, 2, 0, 1]
    in_produce_order = [
        value
        for _, _, batch in broker.produced
        for value in decode_records(batch[RECORDS_OFFSET:], read_header(batch)).values
    ]
    assert in_produce_order == values
    broker.records()  # sequences gap-free per partition


def test_keyed_rows_go_to_their_keys_partitions_in_row_order_and_strings_are_utf8() -> None:
    keys = [f"customer-{i % 17}" for i in range(400)]
    values = [f"order {i} é" for i in range(400)]
    broker = RecordingBroker()
    with _sender(broker, ("key", "value"), batch_bytes=4_000) as sender:
        sender.send_arrow([pyarrow.RecordBatch.from_pydict({"key": keys, "value": values})])
        sender.finish()
    expected: dict[int, list[tuple[bytes | None, bytes | None]]] = {}
    for key, value in zip(keys, values, strict=True):
        partition = partition_for_key(key.encode(), PARTITIONS)
        expected.setdefault(partition, []).append((key.encode(), value.encode()))
    assert broker.records() == expected


@pytest.mark.parametrize("value_type", ["binary", "string", "large_binary", "large_string"])
def test_columnar_paths_take_sliced_arrays_null_values_and_every_binary_kind(
    value_type: str,
) -> None:
    """The records come from the Arrow buffers (``append_columns``): an array that starts
    inside its buffers (a slice), tombstones (null values), and the four binary kinds
    give the records their rows hold."""
    make = getattr(pyarrow, value_type)()
    texts: list[str | None] = [None if i % 7 == 3 else f"v{i}" * (i % 5) for i in range(300)]
    raw = [None if t is None else t.encode() for t in texts]
    as_type = texts if "string" in value_type else raw
    values = pyarrow.array(as_type, make).slice(50, 200)  # rows 50..249
    keys = pyarrow.array([b"k%d" % (i % 11) for i in range(300)], pyarrow.binary())
    keyed_broker, keyless_broker = RecordingBroker(), RecordingBroker()
    with _sender(keyed_broker, ("key", "value"), batch_bytes=600) as sender:
        sender.send_arrow(
            [pyarrow.RecordBatch.from_arrays([keys.slice(50, 200), values], ["key", "value"])]
        )
        sender.finish()
    with _sender(keyless_broker, ("value",), batch_bytes=600) as sender:
        sender.send_arrow([pyarrow.RecordBatch.from_arrays([values], ["value"])])
        sender.finish()
    expected: dict[int, list[tuple[bytes | None, bytes | None]]] = {}
    for row in range(50, 250):
        key = b"k%d" % (row % 11)
        expected.setdefault(partition_for_key(key, PARTITIONS), []).append((key, raw[row]))
    assert keyed_broker.records() == expected
    keyless: list[tuple[bytes | None, bytes | None]] = []
    for _, _, batch in keyless_broker.produced:
        columns = decode_records(batch[RECORDS_OFFSET:], read_header(batch))
        keyless.extend(zip(columns.keys, columns.values, strict=True))
    assert keyless == [(None, raw[row]) for row in range(50, 250)]
    assert len(keyless_broker.produced) > 3  # batches filled to batch_bytes, in row order


def test_rows_with_a_null_key_take_the_row_by_row_path_with_the_same_result() -> None:
    keys: list[bytes | None] = [None if i % 4 == 0 else b"k%d" % (i % 5) for i in range(60)]
    values = [b"v%d" % i for i in range(60)]
    broker = RecordingBroker()
    with _sender(broker, ("key", "value"), batch_bytes=1_000_000) as sender:
        sender.send_arrow([pyarrow.RecordBatch.from_pydict({"key": keys, "value": values})])
        sender.finish()
    found = broker.records()
    assert sum(len(rows) for rows in found.values()) == 60
    for partition, rows in found.items():
        for key, _value in rows:
            if key is not None:
                assert partition_for_key(key, PARTITIONS) == partition
    assert sorted(v for rows in found.values() for _, v in rows) == sorted(values)


def test_a_failed_produce_is_raised_in_the_task_and_the_rest_is_not_sent() -> None:
    broker = RecordingBroker(fail_at=1)
    values = [b"x" * 1000] * 100
    with pytest.raises(InvalidRecordError, match="refused for the test"):
        with _sender(broker, ("value",), batch_bytes=5_000) as sender:
            for _ in range(5):
                sender.send_arrow([pyarrow.RecordBatch.from_pydict({"value": values})])
            sender.finish()
    assert len(broker.produced) == 1


def test_in_order_sender_keeps_order_and_close_drops_what_is_queued() -> None:
    done: list[int] = []
    gate = threading.Event()
    producing = threading.Event()

    def produce(target: TopicPartition, batch: bytes) -> None:
        producing.set()
        gate.wait(5)
        done.append(int(batch))

    sender = InOrderSender(produce)
    for number in range(3):
        sender.submit(TopicPartition("t", 0), b"%d" % number)
    gate.set()
    sender.drain()
    assert done == [0, 1, 2]
    gate.clear()
    producing.clear()
    stopped = InOrderSender(produce)
    stopped.submit(TopicPartition("t", 0), b"7")
    stopped.submit(TopicPartition("t", 0), b"8")
    assert producing.wait(5)  # 7 is being produced, 8 waits in the queue
    threading.Timer(0.2, gate.set).start()
    stopped.close()  # waits for the produce in progress (7); 8 is dropped
    assert done[3:] == [7]


def test_batches_are_built_on_the_build_thread_and_a_failed_build_fails_the_task(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from twinlog.engine.records.batch_builder import RecordBatchBuilder

    build = RecordBatchBuilder.build
    built_on: list[str] = []

    def failing_second_build(builder: RecordBatchBuilder) -> bytes:
        built_on.append(threading.current_thread().name)
        if len(built_on) == 2:
            raise MemoryError("no memory for the test")
        return build(builder)

    monkeypatch.setattr(RecordBatchBuilder, "build", failing_second_build)
    broker = RecordingBroker()
    values = [b"x" * 1000] * 100
    with pytest.raises(MemoryError, match="no memory for the test"):
        with _sender(broker, ("value",), batch_bytes=5_000) as sender:
            for _ in range(5):
                sender.send_arrow([pyarrow.RecordBatch.from_pydict({"value": values})])
            sender.finish()
    assert len(broker.produced) == 1  # the batch before the failed build, and no other
    assert {name.rsplit("_", 1)[0] for name in built_on} == {"twinlog-task-build"}


def test_batches_are_compressed_at_the_settings_level(monkeypatch: pytest.MonkeyPatch) -> None:
    from twinlog.connectors.spark import task_sender
    from twinlog.engine.records.batch_builder import RecordBatchBuilder

    levels: list[int] = []

    class LevelNotingBuilder(RecordBatchBuilder):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            levels.append(kwargs["compression_level"])
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(task_sender, "RecordBatchBuilder", LevelNotingBuilder)
    broker = RecordingBroker()
    sender = _sender(broker, ("value",), batch_bytes=5_000)
    sender.settings = dataclasses.replace(sender.settings, compression="zstd", compression_level=7)
    with sender:
        sender.send_arrow([pyarrow.RecordBatch.from_pydict({"value": [b"x" * 1000] * 20})])
        sender.finish()
    assert levels and set(levels) == {7}
    from twinlog.engine.records.batch_reader import RecordBatch

    decoded = [r.value for _, _, b in broker.produced for r in RecordBatch(b).records()]
    assert decoded == [b"x" * 1000] * 20  # zstd batches that decode
