"""Streaming reads and the exactly-once streaming sink, through real PySpark.

The pipeline test first runs its Spark driver in a subprocess (this file, run
as a script) so it can really kill it (-9) mid-stream; then restarts the query
from its checkpoint in the test's own session to the end of the input; then
recreates the worst crash (the sink committed a micro-batch, Spark's checkpoint
did not record it) and restarts once more. The output must hold each input
record exactly once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from test_rpc_process import ROOT, ServerProcess, environment

from connectors.spark.sink_progress import last_committed_batch
from engine.batch_reader import iter_batches
from engine.types import TopicPartition
from rpc.client.remote import RemoteBroker

pytest.register_assert_rewrite("conftest_spark")  # before the import below, or pytest warns
from conftest_spark import (  # noqa: E402
    create_topic,
    produce_plain,
    produce_transaction,
    spark_marks,
    unique,
    values,
)

PIPELINE_RECORDS = 2000
PIPELINE_MAX_OFFSETS = 400  # per micro-batch: about 5 micro-batches
SUBPROCESS_TIMEOUT_S = 180


def start_pipeline(
    spark: Any, address: str, source: str, sink: str, checkpoint: str, sink_id: str, mode: str
) -> Any:
    """The user's program: read, transform, write exactly once; returns the running query."""
    records = (
        spark.readStream.format("twinlog")
        .option("servers", address)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(PIPELINE_MAX_OFFSETS))
        .load()
    )
    enriched = records.selectExpr("key", "CONCAT('seen:', CAST(value AS STRING)) AS value")
    write = (
        enriched.writeStream.format("twinlog")
        .option("servers", address)
        .option("topic", sink)
        .option("sinkId", sink_id)
        .option("checkpointLocation", checkpoint)
    )
    if mode == "available-now":
        return write.trigger(availableNow=True).start()
    return write.trigger(processingTime="200 milliseconds").start()


def driver_main(arguments: list[str]) -> None:
    """The pipeline as its own Spark driver process (what the test kills)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    from connectors.spark import register

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    start_pipeline(spark, *arguments).awaitTermination()


pytest_plugins = ["conftest_spark"]
pytestmark = spark_marks


def stream(spark: Any, server: ServerProcess, **options: str) -> Any:
    read = spark.readStream.format("twinlog").option("servers", server.address)
    for name, value in options.items():
        read = read.option(name, value)
    return read.load()


def collect_available_now(frame: Any, checkpoint: Path) -> tuple[list[bytes], list[int]]:
    """Run ``frame`` with trigger(availableNow); the values seen and each micro-batch's size."""
    seen: list[bytes] = []

    def keep(batch: Any, batch_id: int) -> None:
        seen.extend(bytes(row.value) for row in batch.select("value").collect())

    query = (
        frame.writeStream.foreachBatch(keep)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    return seen, sizes


def test_stream_reads_in_limited_micro_batches_and_resumes_from_its_checkpoint(
    spark: Any, server: ServerProcess, remote: RemoteBroker, tmp_path: Path
) -> None:
    topic = create_topic(remote, "stream-in", 2)
    produce_plain(remote, topic, 0, values("a", 700), per_batch=50)
    produce_plain(remote, topic, 1, values("b", 100), per_batch=50)
    produce_transaction(remote, {TopicPartition(topic, 1): values("open", 10)}, "open")
    frame = stream(
        spark, server, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="300"
    )

    seen, sizes = collect_available_now(frame, tmp_path / "checkpoint")
    assert sorted(seen) == sorted(values("a", 700) + values("b", 100))
    assert len(sizes) >= 3 and max(sizes) <= 300  # maxOffsetsPerTrigger, shared by backlog

    produce_plain(remote, topic, 1, values("c", 40))
    again, _ = collect_available_now(frame, tmp_path / "checkpoint")
    assert sorted(again) == sorted(values("c", 40))  # only what came after the checkpoint


def test_a_new_stream_starts_at_latest_by_default(
    spark: Any, server: ServerProcess, remote: RemoteBroker, tmp_path: Path
) -> None:
    topic = create_topic(remote, "stream-latest", 1)
    produce_plain(remote, topic, 0, values("old", 30))
    seen, _ = collect_available_now(stream(spark, server, subscribe=topic), tmp_path / "c")
    assert seen == []
    produce_plain(remote, topic, 0, values("new", 5))
    seen, _ = collect_available_now(stream(spark, server, subscribe=topic), tmp_path / "c")
    assert sorted(seen) == sorted(values("new", 5))


def test_a_stream_has_no_ending_offsets(
    spark: Any, server: ServerProcess, remote: RemoteBroker, tmp_path: Path
) -> None:
    topic = create_topic(remote, "stream-end", 1)
    frame = stream(spark, server, subscribe=topic, endingOffsets="latest")
    with pytest.raises(Exception, match="endingOffsets: is for batch queries"):
        collect_available_now(frame, tmp_path / "c")


def _start_driver(arguments: list[str], log: Path) -> subprocess.Popen[bytes]:
    env = environment()
    env["PYSPARK_PYTHON"] = sys.executable
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    with log.open("ab") as output:
        return subprocess.Popen(
            [sys.executable, __file__, *arguments],
            cwd=ROOT,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: the JVM and workers die with it
        )


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def _read_topic(remote: RemoteBroker, topic: str, partitions: int) -> list[bytes]:
    found: list[bytes] = []
    for partition in range(partitions):
        offset = 0
        while fetched := remote.fetch(topic, partition, offset, 1 << 20).records:
            for batch in iter_batches(fetched):
                found.extend(r.value or b"" for r in batch.records())
                offset = batch.header.next_offset
    return found


def test_pipeline_killed_and_restarted_writes_each_record_exactly_once(
    spark: Any, server: ServerProcess, remote: RemoteBroker, tmp_path: Path
) -> None:
    source = create_topic(remote, "pipeline-in", 3)
    sink = create_topic(remote, "pipeline-out", 2)
    inputs = values("in", PIPELINE_RECORDS)
    for partition in range(3):
        produce_plain(remote, source, partition, inputs[partition::3], per_batch=50)
    checkpoint = tmp_path / "checkpoint"
    sink_id = unique("pipeline")
    arguments = [server.address, source, sink, str(checkpoint), sink_id]
    log = tmp_path / "driver.log"

    # 1. A driver process runs the pipeline and is killed -9 in the middle.
    driver = _start_driver([*arguments, "run"], log)
    try:
        deadline = time.monotonic() + SUBPROCESS_TIMEOUT_S
        while last_committed_batch(remote, sink_id) < 1:
            assert driver.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
    finally:
        _kill_group(driver)
    killed_at = len(_read_topic(remote, sink, 2))
    assert 0 < killed_at < PIPELINE_RECORDS, "the kill came after the end of the input"

    # 2. Restarted from its checkpoint, it runs to the end of the input.
    start_pipeline(spark, *arguments, "available-now").awaitTermination()
    assert len(_read_topic(remote, sink, 2)) == PIPELINE_RECORDS

    # 3. The worst moment to crash: after the sink committed the last micro-batch, before
    #    Spark wrote it to the checkpoint's commit log. That is this checkpoint minus its
    #    last commit file; restarted, Spark replays the micro-batch, which the sink drops.
    last = max(int(name.name) for name in (checkpoint / "commits").iterdir() if name.name.isdigit())
    assert not (checkpoint / "offsets" / str(last + 1)).exists()
    (checkpoint / "commits" / str(last)).unlink()
    # Hadoop's checksum file too, or Spark refuses to write the commit file again.
    (checkpoint / "commits" / f".{last}.crc").unlink(missing_ok=True)
    assert last_committed_batch(remote, sink_id) == last
    start_pipeline(spark, *arguments, "available-now").awaitTermination()
    assert (checkpoint / "commits" / str(last)).exists()  # replayed...

    written = _read_topic(remote, sink, 2)  # ... and not written twice
    assert len(written) == PIPELINE_RECORDS, json.dumps(
        {"written": len(written), "distinct": len(set(written))}
    )
    assert sorted(written) == sorted(b"seen:" + value for value in inputs)


if __name__ == "__main__":
    driver_main(sys.argv[1:])
