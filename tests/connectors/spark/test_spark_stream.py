"""Streaming reads and the exactly-once streaming sink, through real PySpark.

The pipeline test first runs its Spark driver in a subprocess (this file, run
as a script) so it can really kill it (-9) mid-stream; then restarts the query
from its checkpoint in the test's own session to the end of the input; then
recreates the worst crash (the sink committed a micro-batch, Spark's checkpoint
did not record it) and restarts once more. The output must hold each input
record exactly once. Two more tests vary the restart: the same checkpoint
spelled differently (still exactly once), and a deleted checkpoint (a new
query, whose micro-batches must be written although their ids were used).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from server_process import ROOT, ServerProcess, environment

from twinlog.connectors.spark.options import WRITE_OPTIONS, Options
from twinlog.connectors.spark.sink_progress import stored_progress
from twinlog.connectors.spark.write_settings import sink_id_of
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.records.batch_reader import iter_batches
from twinlog.rpc.client.remote import RemoteBroker

pytest.register_assert_rewrite("spark_support")  # before the import below, or pytest warns
from spark_support import (  # noqa: E402
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
    spark: Any,
    address: str,
    source: str,
    sink: str,
    checkpoint: str,
    sink_id: str,
    mode: str,
    starting: str = "earliest",
) -> Any:
    """The user's program: read, transform, write exactly once; returns the running query.

    An empty ``sink_id`` leaves the option out: the sink derives it from the checkpoint.
    """
    records = (
        spark.readStream.format("twinlog")
        .option("servers", address)
        .option("subscribe", source)
        .option("startingOffsets", starting)
        .option("maxOffsetsPerTrigger", str(PIPELINE_MAX_OFFSETS))
        .load()
    )
    enriched = records.selectExpr("key", "CONCAT('seen:', CAST(value AS STRING)) AS value")
    write = (
        enriched.writeStream.format("twinlog")
        .option("servers", address)
        .option("topic", sink)
        .option("checkpointLocation", checkpoint)
    )
    if sink_id:
        write = write.option("sinkId", sink_id)
    if mode == "available-now":
        return write.trigger(availableNow=True).start()
    return write.trigger(processingTime="200 milliseconds").start()


def driver_main(arguments: list[str]) -> None:
    """The pipeline as its own Spark driver process (what the test kills)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    from twinlog.connectors.spark import register

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    start_pipeline(spark, *arguments).awaitTermination()


pytest_plugins = ["spark_support"]
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


def forget_last_commit(checkpoint: Path) -> int:
    """Make ``checkpoint`` what a crash after the sink's commit leaves: no last commit file.

    Returns the micro-batch id Spark will replay on restart.
    """
    last = max(int(name.name) for name in (checkpoint / "commits").iterdir() if name.name.isdigit())
    assert not (checkpoint / "offsets" / str(last + 1)).exists()
    (checkpoint / "commits" / str(last)).unlink()
    # Hadoop's checksum file too, or Spark refuses to write the commit file again.
    (checkpoint / "commits" / f".{last}.crc").unlink(missing_ok=True)
    return last


def default_sink_id(checkpoint: str) -> str:
    found = sink_id_of(Options({"checkpointLocation": checkpoint}, WRITE_OPTIONS))
    assert found is not None
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
    arguments = (server.address, source, sink, str(checkpoint), sink_id)
    log = tmp_path / "driver.log"

    # 1. A driver process runs the pipeline and is killed -9 in the middle.
    driver = _start_driver([*arguments, "run"], log)
    try:
        deadline = time.monotonic() + SUBPROCESS_TIMEOUT_S
        while stored_progress(remote, sink_id).batch_id < 1:
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
    #    Spark wrote it to the checkpoint's commit log. Restarted, Spark replays the
    #    micro-batch, which the sink drops.
    last = forget_last_commit(checkpoint)
    assert stored_progress(remote, sink_id).batch_id == last
    start_pipeline(spark, *arguments, "available-now").awaitTermination()
    assert (checkpoint / "commits" / str(last)).exists()  # replayed...

    written = _read_topic(remote, sink, 2)  # ... and not written twice
    assert len(written) == PIPELINE_RECORDS, json.dumps(
        {"written": len(written), "distinct": len(set(written))}
    )
    assert sorted(written) == sorted(b"seen:" + value for value in inputs)


def produce_inputs(remote: RemoteBroker, topic: str, inputs: list[bytes]) -> None:
    for partition in range(2):
        produce_plain(remote, topic, partition, inputs[partition::2], per_batch=50)


def test_a_replay_under_another_spelling_of_the_checkpoint_is_not_written_again(
    spark: Any, server: ServerProcess, remote: RemoteBroker, tmp_path: Path
) -> None:
    """The default sinkId, and a restart naming the same checkpoint as file:.../."""
    source = create_topic(remote, "spelling-in", 2)
    sink = create_topic(remote, "spelling-out", 2)
    inputs = values("in", 1000)
    produce_inputs(remote, source, inputs)
    checkpoint = tmp_path / "checkpoint"
    common = (server.address, source, sink)

    start_pipeline(spark, *common, str(checkpoint), "", "available-now").awaitTermination()
    assert len(_read_topic(remote, sink, 2)) == 1000
    last = forget_last_commit(checkpoint)  # the crash between the commit and the checkpoint
    assert stored_progress(remote, default_sink_id(str(checkpoint))).batch_id == last

    respelled = f"file:{checkpoint}/"
    start_pipeline(spark, *common, respelled, "", "available-now").awaitTermination()
    assert (checkpoint / "commits" / str(last)).exists()  # Spark replayed it...
    written = _read_topic(remote, sink, 2)  # ... and the sink did not write it again
    assert len(written) == 1000, {"written": len(written), "distinct": len(set(written))}
    assert sorted(written) == sorted(b"seen:" + value for value in inputs)


@pytest.mark.parametrize("sink_id", ["", "reused"], ids=["default-sink-id", "explicit-sink-id"])
def test_a_reset_checkpoint_starts_a_new_query_whose_micro_batches_are_written(
    spark: Any, server: ServerProcess, remote: RemoteBroker, tmp_path: Path, sink_id: str
) -> None:
    source = create_topic(remote, "reset-in", 2)
    sink = create_topic(remote, "reset-out", 2)
    sink_id = unique(sink_id) if sink_id else ""
    first, second = values("first", 2000), values("second", 1000)
    produce_inputs(remote, source, first)
    checkpoint = str(tmp_path / "checkpoint")
    common = (server.address, source, sink, checkpoint, sink_id, "available-now")
    progress_name = sink_id or default_sink_id(checkpoint)

    query = start_pipeline(spark, *common)
    query.awaitTermination()
    old = stored_progress(remote, progress_name)
    assert old.batch_id >= 4 and old.query_id == query.id  # micro-batches 0..4 or more
    shutil.rmtree(checkpoint)  # the reset: Spark starts a new query, batch ids from 0

    ends = {str(p.partition): p.log_end_offset for p in remote.describe_topic(source).partitions}
    produce_inputs(remote, source, second)
    query = start_pipeline(spark, *common, starting=json.dumps({source: ends}))
    query.awaitTermination()  # micro-batches 0..2 of the new query, ids the old one used

    written = _read_topic(remote, sink, 2)
    assert len(written) == 3000, {"written": len(written), "distinct": len(set(written))}
    assert sorted(written) == sorted(b"seen:" + value for value in first + second)
    new = stored_progress(remote, progress_name)
    assert new.query_id == query.id != old.query_id
    assert 0 < new.batch_id < old.batch_id


def test_a_stream_to_a_missing_topic_fails_on_the_driver(
    spark: Any, server: ServerProcess, remote: RemoteBroker, tmp_path: Path
) -> None:
    source = create_topic(remote, "missing-in", 1)
    produce_plain(remote, source, 0, values("in", 10))
    missing = unique("no-such-topic")
    sink_id = unique("missing")
    query = start_pipeline(
        spark, server.address, source, missing, str(tmp_path / "c"), sink_id, "available-now"
    )
    with pytest.raises(Exception, match=f"topic: is '{missing}', which does not exist on"):
        query.awaitTermination()
    # Checked before the micro-batch's transaction began: the sink never took its producer.
    assert not any(
        t.transactional_id == f"spark-sink:{sink_id}" for t in remote.list_transactions()
    )


if __name__ == "__main__":
    driver_main(sys.argv[1:])
