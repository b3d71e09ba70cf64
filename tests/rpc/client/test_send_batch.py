"""``Producer.send_batch``: many records for one partition, one future, the same records
``send`` would write; refused whole when any record is malformed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from twinlog.engine.base.errors import RecordTooLargeError
from twinlog.engine.broker.broker import Broker
from twinlog.rpc.client import Admin, Consumer, ConsumerRecord, Producer


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with Broker.open(tmp_path / "data") as opened:
        with Admin(opened) as admin:
            admin.create_topic("rows", 2)
        yield opened


def _read(
    broker: Broker, partition: int, count: int, timeout_s: float = 10.0
) -> list[ConsumerRecord]:
    found: list[ConsumerRecord] = []
    with Consumer(broker) as consumer:
        consumer.assign([("rows", partition)])
        consumer.seek_to_beginning()
        deadline = time.monotonic() + timeout_s
        while len(found) < count and time.monotonic() < deadline:
            found.extend(consumer.poll(200))
    return found


def test_values_keys_and_headers_arrive_in_order_across_several_batches(broker: Broker) -> None:
    values = [f"value-{i:04}".encode() * 200 for i in range(300)]  # 2 KiB per record
    keys = [None if i % 3 else f"k{i}".encode() for i in range(300)]
    headers = [None if i % 5 else [("n", str(i).encode())] for i in range(300)]
    with Producer(broker, batch_bytes=64 * 1024, compression="none") as producer:
        producer.send("rows", b"before", partition=1)
        future = producer.send_batch("rows", 1, values, keys, headers, timestamp_ms=1_700)
        assert len(future) == 300
        assert len(future.spans) >= 9  # 600 KiB in batches of 64 KiB
        producer.flush()
        metadata = future.result(timeout=10)
    assert [m.offset for m in metadata] == list(range(1, 301))
    assert {m.partition for m in metadata} == {1} and metadata[0].timestamp_ms == 1_700
    records = _read(broker, 1, 301)
    assert [r.value for r in records] == [b"before", *values]
    assert [r.key for r in records[1:]] == keys
    assert [list(r.headers) or None for r in records[1:]] == headers


def test_a_transactional_batch_is_visible_only_once_committed(broker: Broker) -> None:
    with Producer(broker, transactional_id="batch-app") as producer:
        producer.init_transactions()
        producer.begin_transaction()
        aborted = producer.send_batch("rows", 0, [b"gone"] * 10)
        producer.abort_transaction()
        assert aborted.exception(timeout=10) is not None
        with producer.transaction():
            kept = producer.send_batch("rows", 0, [b"kept-%d" % i for i in range(10)])
        assert kept.done() and kept.exception() is None
    assert [r.value for r in _read(broker, 0, 10)] == [b"kept-%d" % i for i in range(10)]


def test_a_malformed_record_refuses_the_whole_call(broker: Broker) -> None:
    with Producer(broker, batch_bytes_max=10_000, batch_bytes=4_000) as producer:
        with pytest.raises(TypeError, match=r"values\[2\] must be bytes.*encode"):
            producer.send_batch("rows", 0, [b"a", b"b", "c"])  # type: ignore[list-item]
        with pytest.raises(ValueError, match="keys has 1 items but values has 2"):
            producer.send_batch("rows", 0, [b"a", b"b"], keys=[b"k"])
        with pytest.raises(RecordTooLargeError, match=r"record 1 of the batch.*nothing"):
            producer.send_batch("rows", 0, [b"a", b"x" * 20_000])
        with pytest.raises(TypeError, match="headers of record 0"):
            producer.send_batch("rows", 0, [b"a"], headers=[[(b"n", b"v")]])  # type: ignore[list-item]
        with pytest.raises(TypeError, match="partition must be an int"):
            producer.send_batch("rows", None, [b"a"])  # type: ignore[arg-type]
        empty = producer.send_batch("rows", 0, [])
        assert empty.done() and empty.result() == []
        producer.flush()
    assert _read(broker, 0, 1, timeout_s=1.0) == []  # nothing of a refused call was written


def test_bytearray_and_memoryview_values_are_taken_as_bytes(broker: Broker) -> None:
    with Producer(broker) as producer:
        future = producer.send_batch("rows", 0, [bytearray(b"ba"), memoryview(b"mv"), None])
        producer.flush()
        assert [m.offset for m in future.result(timeout=10)] == [0, 1, 2]
    assert [r.value for r in _read(broker, 0, 3)] == [b"ba", b"mv", None]


def test_a_callback_runs_once_when_every_batch_is_done(broker: Broker) -> None:
    called: list[int] = []
    with Producer(broker, batch_bytes=2_000, compression="none") as producer:
        future = producer.send_batch("rows", 0, [b"z" * 500] * 20)
        future.add_done_callback(lambda done: called.append(len(done)))
        producer.flush()
    assert called == [20]
