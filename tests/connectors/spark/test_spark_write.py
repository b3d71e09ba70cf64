"""Exactly-once batch writes through real PySpark (local[2,2]) into a real ``twinlog serve``."""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from server_process import ServerProcess

from twinlog.engine.base.types import TransactionState
from twinlog.rpc.client.remote import RemoteBroker

pytest.register_assert_rewrite("spark_support")  # before the import below, or pytest warns
from spark_support import create_topic, spark_marks  # noqa: E402

pytest_plugins = ["spark_support"]
pytestmark = spark_marks

PENDING_WAIT_S = 30.0


@pytest.fixture(autouse=True)
def udfs_by_value() -> None:
    """Workers cannot import this test module: ship the UDFs defined here by value."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])


def read_back(spark: Any, server: ServerProcess, topic: str, **options: str) -> list[Any]:
    read = spark.read.format("twinlog").option("servers", server.address).option("subscribe", topic)
    for name, value in options.items():
        read = read.option(name, value)
    return read.load().collect()


def writer(frame: Any, server: ServerProcess, **options: str) -> Any:
    # mode("append"): Spark refuses its default mode (ErrorIfExists) for every Python data source.
    write = frame.write.format("twinlog").mode("append").option("servers", server.address)
    for name, value in options.items():
        write = write.option(name, value)
    return write


def pending_entries(address: str, topic: str) -> int:
    with RemoteBroker(address) as remote:
        return sum(p.journal_entries_pending for p in remote.describe_topic(topic).partitions)


def test_write_then_read_back_keys_headers_partitions(
    spark: Any, server: ServerProcess, remote: RemoteBroker
) -> None:
    topic = create_topic(remote, "written", 3)
    frame = spark.range(300).selectExpr(
        "CAST(id AS STRING) AS value",
        "CAST(CONCAT('k', id % 7) AS BINARY) AS key",
        "CAST(id % 3 AS INT) AS partition",
        "ARRAY(NAMED_STRUCT('key', 'n', 'value', CAST(CAST(id AS STRING) AS BINARY))) AS headers",
    )
    writer(frame, server, topic=topic).save()

    rows = read_back(spark, server, topic, includeHeaders="true")
    assert len(rows) == 300
    for row in rows:
        number = int(bytes(row.value))
        assert row.partition == number % 3
        assert bytes(row.key) == f"k{number % 7}".encode()
        assert [(h.key, bytes(h.value)) for h in row.headers] == [("n", str(number).encode())]
    assert sorted(int(bytes(r.value)) for r in rows) == list(range(300))


def test_topic_column_routes_rows_and_the_topic_option_wins(
    spark: Any, server: ServerProcess, remote: RemoteBroker
) -> None:
    first, second = create_topic(remote, "route", 2), create_topic(remote, "route", 1)
    frame = spark.range(100).selectExpr(
        f"IF(id % 2 = 0, '{first}', '{second}') AS topic",
        "CAST(CAST(id AS STRING) AS BINARY) AS value",
    )
    writer(frame, server).save()
    assert len(read_back(spark, server, first)) == 50
    assert len(read_back(spark, server, second)) == 50

    writer(frame, server, topic=second).save()  # the option overrides the column
    assert len(read_back(spark, server, first)) == 50
    assert len(read_back(spark, server, second)) == 150


def test_a_task_that_fails_after_writing_is_retried_without_duplicates(
    spark: Any, server: ServerProcess, remote: RemoteBroker, tmp_path: Path
) -> None:
    topic = create_topic(remote, "retried", 2)
    address = server.address
    marker = tmp_path / "attempt-0-wrote"
    rows = 2000
    last_of_partition_1 = rows - 1

    def value_of(number: int) -> str:
        from pyspark import TaskContext

        context = TaskContext.get()
        if context.attemptNumber() == 0 and number == last_of_partition_1:
            # Fail attempt 0 only once its rows are in the transaction (journaled, pending).
            deadline = time.monotonic() + PENDING_WAIT_S
            while pending_entries(address, topic) == 0 and time.monotonic() < deadline:
                time.sleep(0.1)
            marker.write_text(str(pending_entries(address, topic)))
            raise RuntimeError("injected failure of attempt 0")
        return f"v{number}"

    from pyspark.sql.functions import col, udf

    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "50")
    try:
        frame = spark.range(0, rows, 1, 2).select(
            udf(value_of, useArrow=False)(col("id")).alias("value")
        )
        writer(frame, server, topic=topic, batchBytes="1024").save()
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")

    assert int(marker.read_text()) > 0, "attempt 0 failed before it wrote anything"
    written = [bytes(r.value).decode() for r in read_back(spark, server, topic)]
    assert len(written) == rows
    assert sorted(written) == sorted(f"v{n}" for n in range(rows))


def test_a_failed_job_leaves_nothing_visible(
    spark: Any, server: ServerProcess, remote: RemoteBroker
) -> None:
    topic = create_topic(remote, "failed-job", 2)
    address = server.address

    def value_of(number: int) -> str:
        if number == 999:  # every attempt of the second task fails, after writing
            deadline = time.monotonic() + PENDING_WAIT_S
            while pending_entries(address, topic) == 0 and time.monotonic() < deadline:
                time.sleep(0.1)
            raise RuntimeError("injected failure of every attempt")
        return f"v{number}"

    from pyspark.sql.functions import col, udf

    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "50")
    try:
        frame = spark.range(0, 1000, 1, 2).select(
            udf(value_of, useArrow=False)(col("id")).alias("value")
        )
        with pytest.raises(Exception, match="injected failure"):
            writer(frame, server, topic=topic, batchBytes="1024").save()
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")

    described = remote.describe_topic(topic)
    assert [p.log_end_offset for p in described.partitions] == [0, 0]
    deadline = time.monotonic() + 10
    while pending_entries(address, topic):  # the abort drops the journaled batches
        assert time.monotonic() < deadline, "the failed job's transaction was not aborted"
        time.sleep(0.1)
    open_writes = [
        t
        for t in remote.list_transactions()
        if t.transactional_id.startswith("spark-write-") and t.state is TransactionState.ONGOING
    ]
    assert open_writes == []
    assert read_back(spark, server, topic) == []


@pytest.mark.parametrize(
    ("select", "options", "message"),
    [
        (
            ["CAST(CAST(id AS STRING) AS BINARY) AS payload"],
            {"topic": "T"},
            "needs a column named value",
        ),
        (["id AS value"], {"topic": "T"}, "column 'value' is bigint"),
        (
            ["CAST(id AS STRING) AS value", "id AS partition"],
            {"topic": "T"},
            "'partition' is bigint",
        ),
        (["CAST(id AS STRING) AS value"], {}, "topic: is required"),
        (
            ["CAST(id AS STRING) AS value"],
            {"topic": "T", "compression": "brotli"},
            "compression: is 'brotli', expected one of none, gzip, snappy, lz4, zstd",
        ),
        (
            ["CAST(id AS STRING) AS value"],
            {"topic": "T", "batchBytes": "999999999"},
            "batchBytes: is 999999999, expected 1024..8388608",
        ),
        (
            ["CAST(id AS STRING) AS value", "CAST(id + 5 AS INT) AS partition"],
            {"topic": "T"},
            "asks for partition [56]",
        ),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_write_mistakes_are_named(
    spark: Any,
    server: ServerProcess,
    remote: RemoteBroker,
    select: list[str],
    options: dict[str, str],
    message: str,
) -> None:
    topic = create_topic(remote, "mistakes", 2)
    frame = spark.range(3).selectExpr(*select)
    with pytest.raises(Exception, match=message):
        writer(frame, server, **{k: v.replace("T", topic) for k, v in options.items()}).save()
    assert [p.log_end_offset for p in remote.describe_topic(topic).partitions] == [0, 0]


def test_overwrite_and_path_are_refused(
    spark: Any, server: ServerProcess, remote: RemoteBroker
) -> None:
    topic = create_topic(remote, "refused", 1)
    frame = spark.range(3).selectExpr("CAST(id AS STRING) AS value")
    with pytest.raises(Exception, match="cannot overwrite"):
        writer(frame, server, topic=topic).mode("overwrite").save()
    with pytest.raises(Exception, match="writes need a broker"):
        frame.write.format("twinlog").mode("append").option("topic", topic).save(
            str(server.data_dir)
        )


def test_a_missing_topic_fails_on_the_driver_before_the_transaction(
    spark: Any, server: ServerProcess, remote: RemoteBroker
) -> None:
    missing = f"no-such-topic-{uuid.uuid4().hex}"
    frame = spark.range(3).selectExpr("CAST(id AS STRING) AS value")
    before = {t.transaction_id for t in remote.list_transactions()}
    with pytest.raises(
        Exception, match=f"topic: is '{missing}', which does not exist on"
    ) as raised:
        writer(frame, server, topic=missing).save()
    # Raised while Spark planned the write: no task ran, so no executor stack trace.
    assert "task_sender.py" not in str(raised.value)
    assert {t.transaction_id for t in remote.list_transactions()} == before
