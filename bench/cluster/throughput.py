"""Throughput through the client users use (``Producer`` to one address), plain and
transactional, against whichever server ``address`` is: a single node or a cluster
partition's leader. Every record is 1 KiB of random bytes to partition 0; compression
is off, so the bytes are what every replica receives and stores."""

from __future__ import annotations

import time
from typing import Any

from bench.cluster.settings import MIB, BenchSettings
from bench.e2e.workload import percentile
from twinlog.rpc.client import Producer
from twinlog.rpc.client.futures import RecordFuture

BATCH_BYTES = 256 * 1024
LINGER_MS = 5  # the producer's default: batches fill while the previous one is in flight
WARMUP_TRANSACTIONS = 3


def _check_delivered(futures: list[RecordFuture], what: str) -> None:
    """A figure counts only acknowledged records: any failure stops the benchmark."""
    for future in futures:
        error = future.exception(timeout=0)
        if error is not None:
            raise RuntimeError(f"{what}: a record was not acknowledged: {error!r}") from error


def plain_throughput(address: str, topic: str, settings: BenchSettings) -> dict[str, Any]:
    """``plain_records`` sent as fast as the idempotent producer batches them, then flushed."""
    payloads = settings.payloads()
    timeout_ms = round(settings.phase_timeout_s * 1000)
    with Producer(
        address, compression="none", linger_ms=LINGER_MS, batch_bytes=BATCH_BYTES
    ) as producer:
        warmup = [
            producer.send(topic, payloads[n % len(payloads)], partition=0)
            for n in range(settings.warmup_records)
        ]
        producer.flush(timeout_ms)
        _check_delivered(warmup, "plain warm-up")
        started_s = time.monotonic()
        futures = [
            producer.send(topic, payloads[n % len(payloads)], partition=0)
            for n in range(settings.plain_records)
        ]
        producer.flush(timeout_ms)
        elapsed_s = time.monotonic() - started_s
        _check_delivered(futures, "plain produce")
    return {
        "records": settings.plain_records,
        "elapsed_s": elapsed_s,
        "records_per_s": settings.plain_records / elapsed_s,
        "mib_per_s": settings.plain_records * settings.record_bytes / elapsed_s / MIB,
    }


def transactional_throughput(
    address: str, topic: str, settings: BenchSettings, transactional_id: str
) -> dict[str, Any]:
    """``transactions`` of ``records_per_transaction`` records each: begin, send, flush,
    commit. Each step is also timed alone: the commit call's round trip is the commit
    latency, and the flush shows what the transactional records' produce costs."""
    payloads = settings.payloads()
    timeout_ms = round(settings.phase_timeout_s * 1000)
    begin_s: list[float] = []
    flush_s: list[float] = []
    commit_s: list[float] = []
    with Producer(
        address,
        transactional_id=transactional_id,
        compression="none",
        linger_ms=LINGER_MS,
        batch_bytes=BATCH_BYTES,
        default_api_timeout_ms=timeout_ms,
    ) as producer:
        producer.init_transactions()
        started_s = 0.0
        for number in range(WARMUP_TRANSACTIONS + settings.transactions):
            if number == WARMUP_TRANSACTIONS:
                started_s = time.monotonic()
            begin_started_s = time.monotonic()
            producer.begin_transaction()
            send_started_s = time.monotonic()
            futures = [
                producer.send(topic, payloads[(number + n) % len(payloads)], partition=0)
                for n in range(settings.records_per_transaction)
            ]
            producer.flush(timeout_ms)
            commit_started_s = time.monotonic()
            _check_delivered(futures, "transactional produce")
            producer.commit_transaction()
            if number >= WARMUP_TRANSACTIONS:
                begin_s.append(send_started_s - begin_started_s)
                flush_s.append(commit_started_s - send_started_s)
                commit_s.append(time.monotonic() - commit_started_s)
        elapsed_s = time.monotonic() - started_s
    records = settings.transactional_records
    return {
        "transactions": settings.transactions,
        "records_per_transaction": settings.records_per_transaction,
        "elapsed_s": elapsed_s,
        "transactions_per_s": settings.transactions / elapsed_s,
        "records_per_s": records / elapsed_s,
        "begin_p50_ms": percentile(begin_s, 0.5) * 1000,
        "send_and_flush_p50_ms": percentile(flush_s, 0.5) * 1000,
        "commit_p50_ms": percentile(commit_s, 0.5) * 1000,
        "commit_p99_ms": percentile(commit_s, 0.99) * 1000,
    }
