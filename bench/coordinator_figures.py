"""Coordinator figures of one run, in-process (issue 4's benchmarks).

    python -m bench.coordinator_figures [--open-transactions 10000] [--json]

Prints, measured in the same run on the same disk:

- commit latency (1 partition, every_append durability) p50/p99, and the same in
  units of one raw fsync of a small write (goal: p50 <= 3 fsyncs);
- transactions/s for 1, 10 and 100 records per transaction vs plain appends of
  the same records (records/s ratio);
- recovery time and coordinator memory with N open transactions (goal: under
  2 s, and <= 1 KiB per open transaction plus its partitions).

These are measurements, not tests: nothing fails because a machine is slow.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.broker import Broker
from twinlog.engine.records.batch_builder import RecordBatchBuilder

RECORD_BYTES = 1024


def fsync_ms(directory: Path, rounds: int = 200) -> float:
    path = directory / "fsync-probe"
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    samples = []
    try:
        for _ in range(rounds):
            started = time.perf_counter()
            os.write(descriptor, b"x" * 128)
            os.fsync(descriptor)
            samples.append((time.perf_counter() - started) * 1000)
    finally:
        os.close(descriptor)
    return statistics.median(samples)


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def batch(values: list[bytes], pid: int = -1, gen: int = -1, seq: int = -1, txn: int = -1) -> bytes:
    builder = RecordBatchBuilder(
        "none", producer_id=pid, producer_generation=gen, base_sequence=seq, transactional=txn != -1
    )
    for value in values:
        builder.append(value, timestamp_ms=1)
    return builder.build()


def commit_latency(broker: Broker, rounds: int) -> list[float]:
    identity = broker.init_producer("latency")
    pid, gen = identity.producer_id, identity.producer_generation
    payload = [b"x" * RECORD_BYTES]
    samples = []
    for _ in range(rounds):
        txn = broker.begin_transaction(pid, gen)
        broker.produce("bench", 0, batch(payload, pid, gen, 0, txn), transaction_id=txn)
        started = time.perf_counter()
        broker.commit_transaction(txn, pid, gen)
        samples.append((time.perf_counter() - started) * 1000)
        # The next begin waits for this one's completion; keep that out of the sample.
    return samples


def transactions_per_second(broker: Broker, records: int, seconds: float) -> tuple[float, float]:
    """(transactional records/s, plain records/s) with ``records`` per transaction/batch."""
    identity = broker.init_producer(f"tps-{records}")
    pid, gen = identity.producer_id, identity.producer_generation
    values = [b"v" * RECORD_BYTES] * records
    done = 0
    deadline = time.perf_counter() + seconds
    started = time.perf_counter()
    while time.perf_counter() < deadline:
        txn = broker.begin_transaction(pid, gen)
        broker.produce("bench", 1, batch(values, pid, gen, 0, txn), transaction_id=txn)
        broker.commit_transaction(txn, pid, gen, wait_for_applied=True)
        done += records
    transactional = done / (time.perf_counter() - started)
    done = 0
    deadline = time.perf_counter() + seconds
    started = time.perf_counter()
    while time.perf_counter() < deadline:
        broker.produce("bench", 2, batch(values))
        done += records
    plain = done / (time.perf_counter() - started)
    return transactional, plain


def open_transactions_figures(directory: Path, count: int) -> dict[str, float]:
    with Broker.open(directory, open_transactions_max=count + 10) as broker:
        broker.create_topic("many", partitions=1)
        identities = [broker.init_producer(f"open-{i}") for i in range(count)]
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.take_snapshot()
        for identity in identities:
            txn = broker.begin_transaction(identity.producer_id, identity.producer_generation)
            broker.add_partitions_to_transaction(
                txn,
                identity.producer_id,
                identity.producer_generation,
                [TopicPartition("many", 0)],
            )
        gc.collect()
        after = tracemalloc.take_snapshot()
        tracemalloc.stop()
        grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
        assert len(broker.list_transactions()) == count
    started = time.perf_counter()
    with Broker.open(directory, open_transactions_max=count + 10) as reopened:
        recovery_s = time.perf_counter() - started
        assert len(reopened.list_transactions()) == count
    return {"bytes_per_open_transaction": grown / count, "recovery_s": recovery_s}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--open-transactions", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=3.0, help="per throughput figure")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    arguments = parser.parse_args()
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="twinlog-bench-", dir=os.environ.get("TMPDIR")) as raw:
        directory = Path(raw)
        figures["fsync_ms_p50"] = fsync_ms(directory)
        with Broker.open(directory / "broker") as broker:
            broker.create_topic("bench", partitions=3)
            samples = commit_latency(broker, 200)
            figures["commit_ms_p50"] = statistics.median(samples)
            figures["commit_ms_p99"] = percentile(samples, 0.99)
            figures["commit_p50_in_fsyncs"] = figures["commit_ms_p50"] / figures["fsync_ms_p50"]
            for records in (1, 10, 100):
                transactional, plain = transactions_per_second(broker, records, arguments.seconds)
                figures[f"txn_records_per_s_{records}"] = transactional
                figures[f"plain_records_per_s_{records}"] = plain
                figures[f"txn_vs_plain_{records}"] = transactional / plain
        figures.update(open_transactions_figures(directory / "open", arguments.open_transactions))
    if arguments.json:
        print(json.dumps(figures, indent=2))
        return
    width = max(map(len, figures))
    for name, value in figures.items():
        print(f"{name:<{width}}  {value:12.3f}")


if __name__ == "__main__":
    main()
