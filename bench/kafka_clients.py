"""Kafka clients against twinlog's Kafka listener, next to twinlog's own client over gRPC.

    .venv/bin/python bench/kafka_clients.py                        # 100,000 records of 100 B
    .venv/bin/python bench/kafka_clients.py --records 20000 --value-bytes 1024 --json k.json

Starts ``twinlog serve --kafka-listener 127.0.0.1:0`` (a subprocess, on free loopback
ports, in a temporary directory removed at the end) and measures, one client at a time:

  consume   the same topic (``--records`` records written by twinlog's Producer) read
            from the beginning to the end by twinlog's Consumer (gRPC), kafka-python's
            KafkaConsumer and confluent-kafka's Consumer (the Kafka listener), each with
            assign(), no group
  produce   ``--records`` records into a topic of their own, from twinlog's Producer
            (gRPC), kafka-python's KafkaProducer and confluent-kafka's Producer (the
            Kafka listener); acks=all, uncompressed, until every record is acknowledged

Values are random bytes (incompressible), without keys or headers, to one partition.
Reported: records per second and MB per second over the whole case (start-up included),
each client's ratio to twinlog's own (higher is faster), and for consumers how long the
first record took (start-up: librdkafka, for one, waits 500 ms before its first offset
lookup) and the rate from then on ("after first"). Use enough records that start-up does
not dominate. The server and the client share the machine, so compare the ratios
of one run, not figures between runs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from twinlog.rpc.client import Admin, Consumer, Producer

START_TIMEOUT_S = 30.0
RUN_TIMEOUT_S = 300.0  # no client case waits longer for its records
GRPC_SERVING = re.compile(r"serving on (\S+):(\d+) ")
KAFKA_SERVING = re.compile(r"serving Kafka clients on (\S+):(\d+)")
BATCH_BYTES = 256 * 1024  # every producer's batch size (twinlog's default)
LINGER_MS = 5


class Server:
    """``twinlog serve --kafka-listener`` on free loopback ports, its log in a file."""

    def __init__(self, directory: Path) -> None:
        self.log_path = directory / "server.log"
        command = [sys.executable, "-m", "twinlog.rpc.cli", "serve"]
        command += ["--data-dir", str(directory / "data"), "--port", "0"]
        command += ["--kafka-listener", "127.0.0.1:0"]
        with self.log_path.open("wb") as log_file:
            self.process = subprocess.Popen(
                command, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            text = self.log_path.read_text(errors="replace")
            grpc_found, kafka_found = GRPC_SERVING.search(text), KAFKA_SERVING.search(text)
            if grpc_found and kafka_found:
                self.grpc = f"127.0.0.1:{grpc_found.group(2)}"
                self.kafka = f"127.0.0.1:{kafka_found.group(2)}"
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise SystemExit(f"the server did not start; its log:\n{self.log_path.read_text()}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


def _timed(run: Callable[[], int], expected: int) -> float:
    started = time.perf_counter()
    count = run()
    elapsed_s = time.perf_counter() - started
    if count < expected:
        raise SystemExit(f"only {count} of {expected} records within {RUN_TIMEOUT_S} s")
    return elapsed_s


class FirstRecord:
    """When a consume case received its first record (its client's start-up before that:
    connections, metadata, offset lookups)."""

    def __init__(self) -> None:
        self.at_s: float | None = None

    def seen(self, count: int) -> None:
        if count and self.at_s is None:
            self.at_s = time.perf_counter()


def consume_twinlog(server: Server, topic: str, records: int, first: FirstRecord) -> int:
    with Consumer(server.grpc) as consumer:
        consumer.assign([(topic, 0)])
        consumer.seek_to_beginning()
        count = 0
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while count < records and time.monotonic() < deadline:
            count += len(consumer.poll(timeout_ms=500))
            first.seen(count)
        return count


def consume_kafka_python(server: Server, topic: str, records: int, first: FirstRecord) -> int:
    import kafka

    consumer = kafka.KafkaConsumer(bootstrap_servers=server.kafka, request_timeout_ms=30_000)
    try:
        consumer.assign([kafka.TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        count = 0
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while count < records and time.monotonic() < deadline:
            polled = consumer.poll(timeout_ms=500, max_records=10_000)
            count += sum(len(batch) for batch in polled.values())
            first.seen(count)
        return count
    finally:
        consumer.close()


def consume_confluent(server: Server, topic: str, records: int, first: FirstRecord) -> int:
    import confluent_kafka

    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": server.kafka, "group.id": "bench", "enable.auto.commit": False}
    )
    try:
        consumer.assign(
            [confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)]
        )
        count = 0
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while count < records and time.monotonic() < deadline:
            # consume() returns early only with num_messages: small calls, so the last one
            # does not wait out its timeout
            messages = consumer.consume(num_messages=500, timeout=0.1)
            count += sum(1 for message in messages if message.error() is None)
            first.seen(count)
        return count
    finally:
        consumer.close()


def produce_twinlog(server: Server, topic: str, values: list[bytes]) -> int:
    with Producer(server.grpc, compression="none", linger_ms=LINGER_MS) as producer:
        for value in values:
            producer.send(topic, value, partition=0)
        producer.flush()
    return len(values)


def produce_kafka_python(server: Server, topic: str, values: list[bytes]) -> int:
    import kafka

    producer = kafka.KafkaProducer(
        bootstrap_servers=server.kafka,
        acks="all",
        linger_ms=LINGER_MS,
        batch_size=BATCH_BYTES,
        request_timeout_ms=30_000,
    )
    try:
        futures = [producer.send(topic, value, partition=0) for value in values]
        producer.flush(timeout=RUN_TIMEOUT_S)
        return sum(1 for future in futures if future.succeeded())
    finally:
        producer.close(timeout=10)


def produce_confluent(server: Server, topic: str, values: list[bytes]) -> int:
    import confluent_kafka

    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": server.kafka,
            "acks": "all",
            "linger.ms": LINGER_MS,
            "batch.size": BATCH_BYTES,
            "compression.type": "none",
        }
    )
    delivered = [0]

    def on_delivery(error: object, message: object) -> None:
        if error is None:
            delivered[0] += 1

    for value in values:
        while True:
            try:
                producer.produce(topic, value, partition=0, on_delivery=on_delivery)
                break
            except BufferError:  # the client's queue is full: let it send
                producer.poll(0.05)
        producer.poll(0)
    producer.flush(RUN_TIMEOUT_S)
    return delivered[0]


def run(records: int, value_bytes: int) -> dict[str, dict[str, float]]:
    values = [os.urandom(value_bytes) for _ in range(records)]
    megabytes = records * value_bytes / 1e6
    figures: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="twinlog-kafka-bench-") as directory:
        server = Server(Path(directory))
        try:
            with Admin(server.grpc) as admin:
                for name in ("source", "twinlog", "kafka_python", "confluent"):
                    admin.create_topic(f"bench-{name}", partitions=1)
            produce_twinlog(server, "bench-source", values)
            consume_cases = {
                "twinlog (gRPC)": consume_twinlog,
                "kafka-python": consume_kafka_python,
                "confluent-kafka": consume_confluent,
            }
            for name, consume in consume_cases.items():
                first = FirstRecord()
                started_s = time.perf_counter()
                elapsed_s = _timed(
                    partial(consume, server, "bench-source", records, first), records
                )
                assert first.at_s is not None
                first_record_s = first.at_s - started_s
                figures[f"consume {name}"] = {
                    "records_per_s": records / elapsed_s,
                    "mb_per_s": megabytes / elapsed_s,
                    "first_record_ms": first_record_s * 1000,
                    # the rate once reading (start-up left out)
                    "records_per_s_after_first": records / max(elapsed_s - first_record_s, 1e-9),
                }
            produce_cases = {
                "twinlog (gRPC)": ("bench-twinlog", produce_twinlog),
                "kafka-python": ("bench-kafka_python", produce_kafka_python),
                "confluent-kafka": ("bench-confluent", produce_confluent),
            }
            for name, (topic, produce) in produce_cases.items():
                elapsed_s = _timed(partial(produce, server, topic, values), records)
                figures[f"produce {name}"] = {
                    "records_per_s": records / elapsed_s,
                    "mb_per_s": megabytes / elapsed_s,
                }
        finally:
            server.stop()
    return figures


def report(figures: dict[str, dict[str, float]]) -> str:
    lines = [
        f"{'case':<28} {'records/s':>12} {'MB/s':>8} {'vs twinlog':>11} {'first record':>13} "
        f"{'after first':>12}"
    ]
    for case, figure in figures.items():
        direction = case.split()[0]
        reference = figures[f"{direction} twinlog (gRPC)"]["records_per_s"]
        ratio = figure["records_per_s"] / reference
        first_ms = figure.get("first_record_ms")
        first = f"{first_ms:>10.0f} ms" if first_ms is not None else ""
        after = figure.get("records_per_s_after_first")
        after_text = f"{after:>12,.0f}" if after is not None else ""
        lines.append(
            f"{case:<28} {figure['records_per_s']:>12,.0f} {figure['mb_per_s']:>8.1f} "
            f"{ratio:>10.2f}x {first:>13} {after_text}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=100_000, help="records per case")
    parser.add_argument("--value-bytes", type=int, default=100, help="bytes of each value")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    figures = run(args.records, args.value_bytes)
    print(report(figures))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
