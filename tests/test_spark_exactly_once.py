"""The exactly-once write protocol, driven the way Spark drives it, on an embedded broker.

No JVM here: the writers are pickled and unpickled as Spark ships them, task
attempts are simulated (one fails after writing, one is a zombie that writes
after the commit), and the broker is an in-process ``engine.Broker`` (which
has the attempt API). The Spark tests (test_spark_write.py, test_spark_stream.py)
run the same code through real PySpark and a real server.
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow
import pytest

import connectors.spark.stream_writer as stream_writer_module
import connectors.spark.writer as writer_module
from connectors.spark.sink_progress import last_committed_batch
from connectors.spark.stream_writer import TwinlogStreamWriter
from connectors.spark.transaction import AttemptReport
from connectors.spark.write_settings import parse_write_settings
from connectors.spark.writer import TwinlogBatchWriter
from engine.batch_reader import iter_batches
from engine.broker import Broker
from engine.errors import ProducerFencedError, TwinlogError


class Unclosable:
    """The embedded broker, shared by every simulated process; close() is the test's job."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def __getattr__(self, name: str) -> Any:
        return getattr(self.broker, name)

    def close(self) -> None:
        pass


@pytest.fixture
def broker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Broker]:
    with Broker.open(tmp_path / "data") as opened:
        opened.create_topic("out", 2)
        shared = Unclosable(opened)
        for module in (writer_module, stream_writer_module):
            monkeypatch.setattr(module, "connect", lambda connection: shared)
        yield opened


def attempt(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Run the next write() as task attempt ``name``."""
    for module in (writer_module, stream_writer_module):
        monkeypatch.setattr(module, "task_attempt", lambda: name)


def frame(numbers: range) -> Iterator[Any]:
    schema = pyarrow.schema([("value", pyarrow.binary())])
    values = [b"v%d" % n for n in numbers]
    for start in range(0, len(values), 7):
        yield pyarrow.RecordBatch.from_arrays(
            [pyarrow.array(values[start : start + 7])], schema=schema
        )


def read_all(broker: Broker, topic: str = "out") -> list[bytes]:
    found: list[bytes] = []
    for partition in range(2):
        chunk = broker.fetch(topic, partition, 0, 1 << 24)
        for batch in iter_batches(chunk.records):
            found.extend(record.value or b"" for record in batch.records())
    return found


def settings(**extra: str) -> Any:
    from pyspark.sql.types import BinaryType, StructField, StructType

    schema = StructType([StructField("value", BinaryType(), True)])
    options = {"servers": "embedded:0", "topic": "out", "batchBytes": "1024", **extra}
    return parse_write_settings(options, schema)


def test_only_the_attempts_reported_to_the_driver_are_applied(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    driver = TwinlogBatchWriter.begin(settings())
    shipped = pickle.dumps(driver)  # what tasks and the commit worker receive

    reports: list[AttemptReport] = []
    attempt(monkeypatch, "p0-a0-t1")
    reports.append(pickle.loads(shipped).write(frame(range(0, 500))))
    attempt(monkeypatch, "p1-a0-t2")  # fails after writing: its report never reaches commit
    failed = pickle.loads(shipped).write(frame(range(500, 1000)))
    assert failed.batches > 0
    attempt(monkeypatch, "p1-a1-t3")  # the retry, numbering its sequences from 0 again
    reports.append(pickle.loads(shipped).write(frame(range(500, 1000))))
    attempt(monkeypatch, "p1-a2-t4")  # a speculative copy that lost the race
    pickle.loads(shipped).write(frame(range(500, 1000)))

    assert read_all(broker) == []  # nothing visible before the commit
    pickle.loads(shipped).commit([*reports, None])
    written = sorted(read_all(broker))
    assert written == sorted(b"v%d" % n for n in range(1000))

    attempt(monkeypatch, "p1-a3-t5")  # a zombie after the commit is refused
    with pytest.raises(TwinlogError):
        pickle.loads(shipped).write(frame(range(500, 510)))
    assert len(read_all(broker)) == 1000


def test_an_aborted_job_leaves_nothing(broker: Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    shipped = pickle.dumps(TwinlogBatchWriter.begin(settings()))
    attempt(monkeypatch, "p0-a0-t1")
    report = pickle.loads(shipped).write(frame(range(300)))
    pickle.loads(shipped).abort([report])
    pickle.loads(shipped).abort([report])  # a second abort is harmless
    assert read_all(broker) == []
    deadline = time.monotonic() + 10
    while any(p.journal_entries_pending for p in broker.describe_topic("out").partitions):
        assert time.monotonic() < deadline, "the abort was never applied"
        time.sleep(0.01)


def test_stream_micro_batches_commit_once_and_replays_are_dropped(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = {"sinkId": "enricher"}

    def micro_batch(batch_id: int, numbers: range, task: str) -> None:
        shipped = pickle.dumps(TwinlogStreamWriter(settings(**options)))  # begins its txn
        attempt(monkeypatch, task)
        report = pickle.loads(shipped).write(frame(numbers))
        TwinlogStreamWriter(settings(**options)).commit([report], batch_id)  # commit worker

    micro_batch(0, range(0, 100), "p0-a0-t1")
    micro_batch(1, range(100, 200), "p0-a0-t2")
    assert last_committed_batch(broker, "enricher") == 1  # type: ignore[arg-type]
    micro_batch(1, range(100, 200), "p0-a0-t3")  # replay after a crash before the checkpoint
    micro_batch(2, range(200, 250), "p0-a0-t4")
    assert sorted(read_all(broker)) == sorted(b"v%d" % n for n in range(250))
    assert last_committed_batch(broker, "enricher") == 2  # type: ignore[arg-type]


def test_a_new_micro_batch_fences_the_tasks_of_older_ones(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = pickle.dumps(TwinlogStreamWriter(settings(sinkId="fenced")))
    pickle.dumps(TwinlogStreamWriter(settings(sinkId="fenced")))  # the next micro-batch begins
    attempt(monkeypatch, "p0-a0-t9")
    with pytest.raises(ProducerFencedError):
        pickle.loads(old).write(frame(range(10)))
