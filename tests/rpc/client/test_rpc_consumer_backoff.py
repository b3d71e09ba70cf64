"""A consumer whose server is down sleeps through its backoff instead of spinning.

With every partition backing off, no fetch is in flight, and waiting on no
futures returns at once: poll() used to loop at full speed (about 60% of a core)
until its timeout. Measured in CPU seconds of this process, not in wall time, so
a slow machine cannot make it flaky.
"""

from __future__ import annotations

import logging
import time

import pytest

from twinlog.rpc.client import Consumer

DEAD_ADDRESS = "127.0.0.1:1"  # nothing listens on port 1: connection refused at once
POLL_MS = 2_000
CPU_BUDGET_S = 0.5  # spinning used about 1.3 s of the 2 s; sleeping uses a few ms


def test_poll_against_a_dead_server_sleeps_and_warns_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="twinlog.client")
    with Consumer(DEAD_ADDRESS, request_timeout_ms=2_000) as consumer:
        partitions = [("down", 0), ("down", 1)]
        consumer.assign(partitions)
        for topic_partition in partitions:
            consumer.seek(topic_partition, 0)  # no network needed to start polling
        started_cpu_s = time.process_time()
        started_s = time.monotonic()
        assert consumer.poll(timeout_ms=POLL_MS) == []
        cpu_s = time.process_time() - started_cpu_s
        assert time.monotonic() - started_s >= POLL_MS / 1000 * 0.9  # it did wait
    assert cpu_s < CPU_BUDGET_S, f"poll used {cpu_s:.2f} s of CPU in {POLL_MS} ms: spinning"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "BrokerUnavailableError" in warnings[0].getMessage()
