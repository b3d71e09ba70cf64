"""The exactly-once write protocol, driven the way Spark drives it, on an embedded broker.

No JVM here: the writers are pickled and unpickled as Spark ships them, task
attempts are simulated (one fails after writing, one is a zombie that writes
after the commit), and the broker is an in-process ``twinlog.Broker`` (which
has the attempt API). The Spark tests (test_spark_write.py, test_spark_stream.py)
run the same code through real PySpark and a real server.
"""

from __future__ import annotations

import logging
import pickle
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow
import pytest

import twinlog.connectors.spark.stream_writer as stream_writer_module
import twinlog.connectors.spark.writer as writer_module
from twinlog.connectors.spark.sink_progress import (
    SinkProgress,
    query_id_of_words,
    query_id_words,
    stored_progress,
)
from twinlog.connectors.spark.stream_writer import TwinlogStreamWriter
from twinlog.connectors.spark.transaction import AttemptReport, TransactionTicket, abort_quietly
from twinlog.connectors.spark.write_settings import parse_write_settings
from twinlog.connectors.spark.writer import TwinlogBatchWriter
from twinlog.engine.base.errors import ProducerFencedError, TwinlogError
from twinlog.engine.broker.broker import Broker
from twinlog.engine.records.batch_reader import iter_batches


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


def in_query(monkeypatch: pytest.MonkeyPatch, query_id: str) -> None:
    """Run the next streaming write() in the query ``query_id`` (Spark's StreamingQuery.id)."""
    monkeypatch.setattr(stream_writer_module, "streaming_query_id", lambda: query_id)


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


def micro_batch(
    monkeypatch: pytest.MonkeyPatch,
    sink_id: str,
    query_id: str,
    batch_id: int,
    numbers: range,
    task: str,
) -> None:
    """One micro-batch as Spark runs it: planning worker, one task, commit worker."""
    options = {"sinkId": sink_id}
    shipped = pickle.dumps(TwinlogStreamWriter(settings(**options)))  # begins its txn
    attempt(monkeypatch, task)
    in_query(monkeypatch, query_id)
    report = pickle.loads(shipped).write(frame(numbers))
    TwinlogStreamWriter(settings(**options)).commit([report], batch_id)  # commit worker


def test_stream_micro_batches_commit_once_and_replays_are_dropped(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    query = str(uuid.uuid4())
    micro_batch(monkeypatch, "enricher", query, 0, range(0, 100), "p0-a0-t1")
    micro_batch(monkeypatch, "enricher", query, 1, range(100, 200), "p0-a0-t2")
    assert stored_progress(broker, "enricher") == SinkProgress(1, query)
    # A replay after a crash before the checkpoint:
    micro_batch(monkeypatch, "enricher", query, 1, range(100, 200), "p0-a0-t3")
    micro_batch(monkeypatch, "enricher", query, 2, range(200, 250), "p0-a0-t4")
    assert sorted(read_all(broker)) == sorted(b"v%d" % n for n in range(250))
    assert stored_progress(broker, "enricher") == SinkProgress(2, query)


def test_a_new_query_on_the_same_sink_starts_fresh(
    broker: Broker, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A checkpoint reset: Spark's new query numbers its micro-batches from 0 again."""
    old, new = str(uuid.uuid4()), str(uuid.uuid4())
    for batch_id in range(5):
        numbers = range(batch_id * 10, batch_id * 10 + 10)
        micro_batch(monkeypatch, "reset", old, batch_id, numbers, f"p0-a0-t{batch_id}")
    with caplog.at_level(logging.INFO, logger="twinlog.spark"):
        for batch_id in range(3):
            numbers = range(100 + batch_id * 10, 110 + batch_id * 10)
            micro_batch(monkeypatch, "reset", new, batch_id, numbers, f"p0-a0-t{10 + batch_id}")
    assert f"micro-batch 4 of query {old}; this is query {new}" in caplog.text
    assert "starts fresh" in caplog.text
    assert stored_progress(broker, "reset") == SinkProgress(2, new)
    # ... and the new query's own replays are still dropped.
    micro_batch(monkeypatch, "reset", new, 2, range(120, 130), "p0-a0-t20")
    expected = [*range(0, 50), *range(100, 130)]
    assert sorted(read_all(broker)) == sorted(b"v%d" % n for n in expected)


def test_query_ids_are_stored_as_four_words() -> None:
    query = str(uuid.uuid4())
    words = query_id_words(query)
    assert len(words) == 4 and all(0 <= word < 1 << 32 for word in words)
    assert query_id_of_words(words) == query
    assert query_id_of_words((-1, -1, -1, -1)) is None  # nothing stored
    assert query_id_words("ffffffff-ffff-ffff-ffff-ffffffffffff") == (0xFFFFFFFF,) * 4
    assert SinkProgress(7, query).last_committed_by(query) == 7
    assert SinkProgress(7, query).last_committed_by(str(uuid.uuid4())) == -1
    assert SinkProgress(7, None).last_committed_by(query) == -1


def begun(broker: Broker, name: str) -> TransactionTicket:
    return TransactionTicket.begin(broker, name, 60_000)


def test_an_abort_that_fails_says_what_is_known_of_the_rows(
    broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="twinlog.spark")
    aborted = begun(broker, "abort-ok")
    abort_quietly(broker, aborted, "job a")
    assert "none of its rows is visible" in caplog.text

    caplog.clear()  # the commit went through, though Spark then called abort()
    committed = begun(broker, "abort-committed")
    broker.commit_transaction(
        committed.transaction_id,
        committed.producer_id,
        committed.producer_generation,
        wait_for_applied=True,
    )
    abort_quietly(broker, committed, "job b")
    assert "Its rows ARE committed" in caplog.text
    assert "none of its rows is visible" not in caplog.text

    caplog.clear()  # a newer producer took over: whether it committed first is unknown
    fenced = begun(broker, "abort-fenced")
    broker.commit_transaction(
        fenced.transaction_id, fenced.producer_id, fenced.producer_generation, True
    )
    broker.init_producer("abort-fenced", 60_000)
    abort_quietly(broker, fenced, "job c")
    assert "Its rows may be committed" in caplog.text
    assert f"twinlog txn abort {fenced.transaction_id}" in caplog.text
    assert "none of its rows is visible" not in caplog.text


def test_a_new_micro_batch_fences_the_tasks_of_older_ones(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = pickle.dumps(TwinlogStreamWriter(settings(sinkId="fenced")))
    pickle.dumps(TwinlogStreamWriter(settings(sinkId="fenced")))  # the next micro-batch begins
    attempt(monkeypatch, "p0-a0-t9")
    in_query(monkeypatch, str(uuid.uuid4()))
    with pytest.raises(ProducerFencedError):
        pickle.loads(old).write(frame(range(10)))
