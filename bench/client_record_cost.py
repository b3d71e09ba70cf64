"""What one record costs the client in Python: CPU time of the calling thread per record.

    python bench/client_record_cost.py                 # 1 KiB and 100-byte records
    python bench/client_record_cost.py --records 20000 --json cost.json

Each case queues ``--records`` key-less, header-less records for one partition of an
embedded ``Broker`` and is timed with ``time.thread_time()`` of the calling thread only:
the producer's sender thread and the broker's work are not counted (they run beside it,
as they do over gRPC, where they are another process). Cases:

  send             Producer.send(topic, value, partition=0), once per record
  send_batch       Producer.send_batch(topic, 0, values) in calls of 1,000 records
  builder          RecordBatchBuilder.append per record (no producer around it)
  builder_many     RecordBatchBuilder.append_many (what send_batch runs)
  kafka_python     kafka-python's DefaultRecordBatchBuilder.append per record, the
                   reference the issue names (it has no producer without a broker;
                   its build() and CRC are left out, so it is a lower bound)
  poll             Consumer.poll reading the same number of records back, from the
                   start of the partition (the reader's side: decoding each fetched
                   batch and building its ConsumerRecords; no ratio is printed for it)

Reported: microseconds per record, median of ``--rounds`` rounds, and each case's ratio
to kafka_python (lower is cheaper). Ratios from one run are what to compare.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from twinlog.engine.broker.broker import Broker
from twinlog.engine.records.batch_builder import RecordBatchBuilder
from twinlog.rpc.client import Admin, Consumer, Producer

TIMESTAMP_MS = 1_700_000_000_000
CHUNK_RECORDS = 1_000
BATCH_BYTES = 256 * 1024  # the producer's default batch_bytes, for every case


def _kafka_python_case(values: list[bytes]) -> Callable[[], None] | None:
    try:
        from kafka.record.default_records import DefaultRecordBatchBuilder
    except ImportError:
        return None

    def new_builder() -> DefaultRecordBatchBuilder:
        return DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, BATCH_BYTES)

    def run() -> None:
        # As kafka-python's accumulator: append until the builder says it is full. Its
        # build() is left out: without the optional crc32c package it computes the CRC in
        # pure Python (~0.1 ms per KiB), which would compare CRC code, not record code.
        builder = new_builder()
        offset = 0
        for value in values:
            if builder.append(offset, TIMESTAMP_MS, None, value, []) is None:
                builder, offset = new_builder(), 0
                builder.append(offset, TIMESTAMP_MS, None, value, [])
            offset += 1

    return run


def _builder_case(values: list[bytes]) -> None:
    builder = RecordBatchBuilder("none")
    for value in values:
        builder.append(value, timestamp_ms=TIMESTAMP_MS)
        if builder.estimated_size_bytes >= BATCH_BYTES:
            builder.build()
            builder = RecordBatchBuilder("none")
    builder.build()


def _builder_many_case(values: list[bytes]) -> None:
    start = 0
    while start < len(values):
        builder = RecordBatchBuilder("none")
        start = builder.append_many(
            values, timestamp_ms=TIMESTAMP_MS, start=start, size_bytes_max=BATCH_BYTES
        )
        builder.build()


def _poll_case(consumer: Consumer, records: int) -> float:
    """CPU seconds of this thread to poll ``records`` records from the partition's start
    (the fetches themselves run on the consumer's fetch threads, as over gRPC)."""
    consumer.assign([("cost", 0)])
    consumer.seek(("cost", 0), 0)
    read = 0
    used_s = 0.0
    deadline_s = time.monotonic() + 60
    while read < records and time.monotonic() < deadline_s:
        began = time.thread_time()
        read += len(consumer.poll(timeout_ms=1_000))
        used_s += time.thread_time() - began
    if read < records:
        raise RuntimeError(f"poll read {read} of {records} records in 60 s")
    return used_s * records / read  # the last poll may have read more than asked


def measure(record_bytes: int, records: int, rounds: int) -> dict[str, float]:
    values = [os.urandom(record_bytes) for _ in range(records)]
    cases: dict[str, Callable[[], None]] = {
        "builder": lambda: _builder_case(values),
        "builder_many": lambda: _builder_many_case(values),
    }
    kafka_python = _kafka_python_case(values)
    if kafka_python is not None:
        cases["kafka_python"] = kafka_python
    found: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="twinlog-record-cost-") as directory:
        with Broker.open(Path(directory) / "data") as broker:
            with Admin(broker) as admin:
                admin.create_topic("cost", 1)
            # Large batches and buffer: the calls never wait for the sender.
            with Producer(
                broker, compression="none", linger_ms=5, buffer_bytes_max=1 << 30
            ) as producer:

                def send() -> None:
                    for value in values:
                        producer.send("cost", value, partition=0)

                def send_batch() -> None:
                    for start in range(0, records, CHUNK_RECORDS):
                        producer.send_batch("cost", 0, values[start : start + CHUNK_RECORDS])

                cases = {"send": send, "send_batch": send_batch, **cases}
                for _ in range(rounds):
                    for name, case in cases.items():
                        began = time.thread_time()
                        case()
                        found.setdefault(name, []).append(time.thread_time() - began)
                        producer.flush()
            with Consumer(broker, max_poll_records=records) as consumer:
                for _ in range(rounds):
                    found.setdefault("poll", []).append(_poll_case(consumer, records))
    return {name: statistics.median(times) / records * 1e6 for name, times in found.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=20_000, help="records per case (20000)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds; the median is kept (5)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    results: dict[str, dict[str, float]] = {}
    for record_bytes in (1024, 100):
        figures = measure(record_bytes, args.records, args.rounds)
        results[f"{record_bytes}B"] = figures
        reference = figures.get("kafka_python")
        print(f"\n{record_bytes}-byte records, {args.records:,} per case (µs per record)")
        for name, micros in figures.items():
            ratio = ""
            if reference is not None and name != "poll":  # poll reads: no builder to compare
                ratio = f"  {micros / reference:5.2f}x kafka-python"
            print(f"  {name:<14}{micros:8.2f}{ratio}")
        if reference is None:
            print("  (kafka-python is not installed: no reference)")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
