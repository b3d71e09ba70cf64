"""The client process of the benchmark: ``python -m bench.e2e.client --server ADDR --mode M``.

Prints ``progress DONE TOTAL`` lines while it works and one ``result {json}`` line
at the end, which the runner reads.

mode ``transactional``: each transaction sends 1,000 records over 4 partitions,
flushes, then commits; the commit's round trip is timed alone. A consumer thread
in this process then reads the 4 partitions while up to 100 more transactions are
committed one at a time; a transaction is *visible* when the last record it wrote
to each partition has been read; lag = visible - commit acknowledged.

mode ``plain``: the same records through an idempotent, non-transactional
producer, flushed every 1,000 records (the same batches and round trips, no
journal, no commit).

Once its arguments are read, the process freezes its start-up objects
(``freeze_startup_objects``), as docs/operations.md ("Pauses") suggests for a
client that cares about its slowest records: without it, the one full collection
that falls among the lag probes adds 14-19 ms to one of them.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time

from bench.e2e.workload import Workload, percentile
from twinlog.engine.base.collector import freeze_startup_objects
from twinlog.rpc.client import Consumer, Producer

BATCH_BYTES = 300 * 1024  # one batch per partition per transaction (250 KiB of values)
LAG_PROBES_MAX = 100  # a p99 of fewer probes would be their maximum


def report_progress(done: int, total: int) -> None:
    print(f"progress {done} {total}", flush=True)


class VisibilityWatcher:
    """Reads the topic and notes when each transaction's end markers have all been read."""

    def __init__(self, server: str, topic: str, partitions: int) -> None:
        self.consumer = Consumer(server, fetch_max_wait_ms=200, max_poll_records=100_000)
        self.consumer.assign([(topic, p) for p in range(partitions)])
        self.consumer.seek_to_end()
        self.partitions = partitions
        self.markers_seen: dict[int, int] = {}
        self.visible_s: dict[int, float] = {}
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            records = self.consumer.poll(timeout_ms=100)
            now_s = time.monotonic()
            for record in records:
                if record.key and record.key.startswith(b"end-"):
                    number = int(record.key[4:])
                    with self.lock:
                        self.markers_seen[number] = self.markers_seen.get(number, 0) + 1
                        if self.markers_seen[number] == self.partitions:
                            self.visible_s[number] = now_s

    def wait_visible(self, number: int, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.lock:
                if number in self.visible_s:
                    return
            time.sleep(0.001)
        raise TimeoutError(f"transaction {number} was not visible after {timeout_s} s")

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        self.consumer.close()


def send_transaction_records(
    producer: Producer, topic: str, workload: Workload, payloads: list[bytes], number: int
) -> None:
    per_partition = workload.records_per_transaction // workload.partitions
    index = number * workload.records_per_transaction
    for partition in range(workload.partitions):
        for position in range(per_partition):
            key = f"end-{number}".encode() if position == per_partition - 1 else None
            producer.send(topic, payloads[index % len(payloads)], key=key, partition=partition)
            index += 1


def run_transactional(server: str, topic: str, workload: Workload) -> dict[str, float]:
    """Throughput (and commit round trips) first; then lag probes, one transaction at a time."""
    payloads = workload.payloads()
    producer = Producer(
        server, transactional_id=f"bench-{time.time_ns()}", compression="none",
        linger_ms=1_000, batch_bytes=BATCH_BYTES,
    )  # fmt: skip
    producer.init_transactions()
    commit_s: list[float] = []
    probes = min(workload.transactions, LAG_PROBES_MAX)
    total = workload.warmup_transactions + workload.transactions
    started_s = 0.0
    for number in range(total):
        if number == workload.warmup_transactions:
            started_s = time.monotonic()
        producer.begin_transaction()
        send_transaction_records(producer, topic, workload, payloads, number)
        producer.flush()
        before_s = time.monotonic()
        producer.commit_transaction()
        if number >= workload.warmup_transactions:
            commit_s.append(time.monotonic() - before_s)
        report_progress(number + 1, total + probes)
    elapsed_s = time.monotonic() - started_s
    # Lag: the watcher reads while the producer is idle, so a probe measures the path
    # commit -> apply -> long poll wake-up, not a queue of earlier transactions.
    watcher = VisibilityWatcher(server, topic, workload.partitions)
    lags_s = []
    for number in range(total, total + probes):
        producer.begin_transaction()
        send_transaction_records(producer, topic, workload, payloads, number)
        producer.flush()
        producer.commit_transaction()
        acknowledged_s = time.monotonic()
        watcher.wait_visible(number)
        lags_s.append(watcher.visible_s[number] - acknowledged_s)
        report_progress(number + 1, total + probes)
    watcher.close()
    producer.close()
    return {
        "records_per_s": workload.records / elapsed_s,
        "mib_per_s": workload.payload_bytes / elapsed_s / (1 << 20),
        "elapsed_s": elapsed_s,
        "commit_p50_ms": percentile(commit_s, 0.5) * 1000,
        "commit_p99_ms": percentile(commit_s, 0.99) * 1000,
        "visible_lag_p50_ms": percentile(lags_s, 0.5) * 1000,
        "visible_lag_p99_ms": percentile(lags_s, 0.99) * 1000,
        "lag_probes": probes,
    }


def run_plain(server: str, topic: str, workload: Workload) -> dict[str, float]:
    payloads = workload.payloads()
    producer = Producer(server, compression="none", linger_ms=1_000, batch_bytes=BATCH_BYTES)
    total = workload.warmup_transactions + workload.transactions
    started_s = 0.0
    for number in range(total):
        if number == workload.warmup_transactions:
            started_s = time.monotonic()
        send_transaction_records(producer, topic, workload, payloads, number)
        producer.flush()
        report_progress(number + 1, total)
    elapsed_s = time.monotonic() - started_s
    producer.close()
    return {
        "records_per_s": workload.records / elapsed_s,
        "mib_per_s": workload.payload_bytes / elapsed_s / (1 << 20),
        "elapsed_s": elapsed_s,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--server", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--mode", choices=("transactional", "plain"), required=True)
    parser.add_argument("--transactions", type=int, default=Workload.transactions)
    parser.add_argument("--warmup", type=int, default=Workload.warmup_transactions)
    parser.add_argument(
        "--records-per-transaction", type=int, default=Workload.records_per_transaction
    )
    args = parser.parse_args(argv)
    workload = Workload(
        transactions=args.transactions,
        warmup_transactions=args.warmup,
        records_per_transaction=args.records_per_transaction,
    )
    freeze_startup_objects()
    run = run_transactional if args.mode == "transactional" else run_plain
    result = run(args.server, args.topic, workload)
    print("result " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
