"""The embedded contenders of the benchmark: a ``Broker`` in this process, written to
by the public ``Producer`` (no server, no network), in transactions.

    embedded        per transaction: begin, ``send(topic, value, partition=p)`` for each
                    of the 1,000 records (250 to each of 4 partitions), flush, commit
    embedded-batch  the same, but one ``send_batch(topic, p, values)`` per partition
                    (250 values each), flush, commit

The producer has the gRPC client's settings (no compression, one batch per
partition per transaction), and the broker its defaults. This process keeps freed
memory (``keep_freed_memory``), as ``twinlog serve`` does and as an application
embedding a broker may: without it each transaction faults ≈ 3 MiB of fresh pages in. The broker's data goes to
``DIRECTORY/embedded-data``; the broker is closed when the measurement ends.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from pathlib import Path

from bench.e2e.client import BATCH_BYTES
from bench.e2e.workload import Workload, percentile
from twinlog.engine.base.allocator import keep_freed_memory
from twinlog.engine.broker.broker import Broker
from twinlog.rpc.client import Producer

Progress = Callable[[str, int, int], None]
VISIBLE_TIMEOUT_S = 60.0


def _no_progress(phase: str, done: int, total: int) -> None:
    pass


def run_embedded(
    broker: Broker,
    topic: str,
    workload: Workload,
    batch_api: bool,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, float]:
    """Transactions of ``workload`` into ``topic`` (``workload.partitions`` partitions,
    created by the caller) of ``broker``: ``send`` per record, or ``send_batch`` per
    partition if ``batch_api``. Warm-up transactions first, untimed."""
    payloads = workload.payloads()
    pool = len(payloads)
    per_partition = workload.records_per_transaction // workload.partitions
    total = workload.warmup_transactions + workload.transactions
    commit_s: list[float] = []
    producer = Producer(
        broker, transactional_id=f"bench-embedded-{time.time_ns()}", compression="none",
        linger_ms=1_000, batch_bytes=BATCH_BYTES,
    )  # fmt: skip
    try:
        producer.init_transactions()
        started_s = time.monotonic()
        for number in range(total):
            if number == workload.warmup_transactions:
                started_s = time.monotonic()
            producer.begin_transaction()
            index = number * workload.records_per_transaction
            for partition in range(workload.partitions):
                if batch_api:
                    values = [payloads[(index + i) % pool] for i in range(per_partition)]
                    producer.send_batch(topic, partition, values)
                else:
                    for i in range(per_partition):
                        producer.send(topic, payloads[(index + i) % pool], partition=partition)
                index += per_partition
            producer.flush()
            before_s = time.monotonic()
            producer.commit_transaction()
            if number >= workload.warmup_transactions:
                commit_s.append(time.monotonic() - before_s)
            if progress is not None:
                progress(number + 1, total)
        elapsed_s = time.monotonic() - started_s
    finally:
        producer.close()
    _check_written(broker, topic, workload.partitions, total * per_partition)
    records = workload.transactions * per_partition * workload.partitions
    return {
        "records_per_s": records / elapsed_s,
        "mib_per_s": records * workload.record_bytes / elapsed_s / (1 << 20),
        "elapsed_s": elapsed_s,
        "commit_p50_ms": percentile(commit_s, 0.5) * 1000,
        "commit_p99_ms": percentile(commit_s, 0.99) * 1000,
    }


def _check_written(broker: Broker, topic: str, partitions: int, records: int) -> None:
    """Every partition's high watermark reaches at least its records (the last commit
    is durable when it returns, and applied soon after): the figures count real writes."""
    deadline_s = time.monotonic() + VISIBLE_TIMEOUT_S
    while True:
        short = [p for p in range(partitions) if broker.list_offset(topic, p, "latest") < records]
        if not short:
            return
        if time.monotonic() > deadline_s:
            raise RuntimeError(
                f"{topic}: partitions {short} hold fewer than the {records} records sent to "
                f"each after {VISIBLE_TIMEOUT_S:.0f} s"
            )
        time.sleep(0.01)


def measure_embedded(
    directory: Path, workload: Workload, progress: Progress = _no_progress
) -> dict[str, dict[str, float]]:
    """Both embedded contenders against one broker (default settings) opened in
    ``directory / "embedded-data"`` and closed before returning: one topic each."""
    keep_freed_memory()
    results: dict[str, dict[str, float]] = {}
    with Broker.open(directory / "embedded-data") as broker:
        for name, topic, batch_api in (
            ("embedded", "bench-embedded", False),
            ("embedded_batch", "bench-embedded-batch", True),
        ):
            broker.create_topic(topic, workload.partitions)
            phase = name.replace("_", "-")
            results[name] = run_embedded(
                broker, topic, workload, batch_api, functools.partial(progress, phase)
            )
    return results
