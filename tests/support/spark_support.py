"""Shared fixtures of the Spark tests: one SparkSession and one real server for the whole run.

Test modules load this with ``pytest_plugins = ["spark_support"]``. Starting
Spark costs ~10 s, so the session is session-scoped; every test uses its own
topic names instead of its own server. ``local[2,2]``: two task threads, and a
failed task is retried once (the write tests rely on the retry).

Helpers produce test data through the broker API directly (``RemoteBroker`` and
``RecordBatchBuilder``), so each test controls its batches, timestamps and
transactions exactly.
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import pytest
from server_process import ServerProcess

from twinlog.engine.base.types import TopicPartition
from twinlog.engine.records.batch_builder import RecordBatchBuilder
from twinlog.rpc.client.remote import RemoteBroker

SPARK_MASTER = "local[2,2]"
_names = itertools.count()

# No skip when Java or PySpark is missing: CI has both, and a skipped test would hide it.
spark_marks = [pytest.mark.spark, pytest.mark.slow]


def unique(prefix: str) -> str:
    """A topic (or id) name no other test of this run uses."""
    return f"{prefix}-{os.getpid()}-{next(_names)}"


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    from twinlog.connectors.spark import register

    session = (
        SparkSession.builder.master(SPARK_MASTER)
        .appName("twinlog-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    directory = tmp_path_factory.mktemp("spark-broker")
    with ServerProcess(
        directory / "data",
        "--config",
        "transaction_check_interval_ms=200",
        "--config",
        "retention_check_interval_ms=200",
    ) as process:
        yield process


@pytest.fixture(scope="session")
def remote(server: ServerProcess) -> Iterator[RemoteBroker]:
    with RemoteBroker(server.address) as client:
        yield client


def create_topic(remote: RemoteBroker, prefix: str, partitions: int) -> str:
    name = unique(prefix)
    remote.create_topic(name, partitions)
    return name


def produce_plain(
    remote: RemoteBroker,
    topic: str,
    partition: int,
    values: Iterable[bytes],
    *,
    per_batch: int = 100,
    timestamp_ms: int | None = None,
    key: bytes | None = None,
    headers: Sequence[tuple[str, bytes | None]] | None = None,
) -> None:
    """Plain (non-transactional) batches of ``per_batch`` records each."""
    builder = RecordBatchBuilder("zstd")
    for value in values:
        builder.append(value, key=key, headers=headers, timestamp_ms=timestamp_ms)
        if len(builder) == per_batch:
            remote.produce(topic, partition, builder.build())
            builder = RecordBatchBuilder("zstd")
    if len(builder):
        remote.produce(topic, partition, builder.build())


def produce_transaction(
    remote: RemoteBroker,
    records: dict[TopicPartition, list[bytes]],
    end: str,
) -> None:
    """One transaction over ``records``' partitions, then ``end``: commit, abort or open."""
    # Long enough that an "open" transaction stays open for the whole test.
    identity = remote.init_producer(unique("spark-test-txn"), 600_000)
    transaction_id = remote.begin_transaction(identity.producer_id, identity.producer_generation)
    for (topic, partition), values in records.items():
        builder = RecordBatchBuilder(
            "zstd",
            producer_id=identity.producer_id,
            producer_generation=identity.producer_generation,
            base_sequence=0,
            transactional=True,
        )
        for value in values:
            builder.append(value)
        remote.produce(topic, partition, builder.build())
    if end == "commit":
        remote.commit_transaction(
            transaction_id, identity.producer_id, identity.producer_generation, True
        )
    elif end == "abort":
        remote.abort_transaction(transaction_id, identity.producer_id, identity.producer_generation)
    else:
        assert end == "open", end


def values(prefix: str, count: int) -> list[bytes]:
    return [f"{prefix}-{index}".encode() for index in range(count)]
