"""Produce latency: one record at a time through the ``Producer`` (``linger_ms=0``), each
waited for before the next, so a sample is one request's round trip, acks=all on a
cluster leader (append, followers fetch it, the high watermark passes it)."""

from __future__ import annotations

import time
from typing import Any

from bench.cluster.settings import BenchSettings
from bench.e2e.workload import percentile
from twinlog.rpc.client import Producer

WARMUP_SAMPLES = 10


def produce_latency(address: str, topic: str, settings: BenchSettings) -> dict[str, Any]:
    payload = settings.payloads()[0]
    samples_s: list[float] = []
    with Producer(address, compression="none", linger_ms=0) as producer:
        for number in range(WARMUP_SAMPLES + settings.latency_samples):
            before_s = time.monotonic()
            producer.send(topic, payload, partition=0).result(timeout=settings.phase_timeout_s)
            if number >= WARMUP_SAMPLES:
                samples_s.append(time.monotonic() - before_s)
    return {
        "samples": len(samples_s),
        "produce_p50_ms": percentile(samples_s, 0.5) * 1000,
        "produce_p99_ms": percentile(samples_s, 0.99) * 1000,
    }
