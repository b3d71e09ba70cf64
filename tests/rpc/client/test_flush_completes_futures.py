"""flush() returns only once every record sent before it has its outcome: its future is
done, as Kafka's flush promises, even when the sender's answer thread is slow to hand a
batch's result to its futures after the answer came."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from rpc_fakes import FakeBroker

from twinlog.rpc.client import Producer
from twinlog.rpc.client import sender as sender_module

HANDOFF_DELAY_S = 0.3  # between the answer's bookkeeping and the futures being told


@pytest.fixture()
def slow_handoff(monkeypatch: pytest.MonkeyPatch) -> None:
    complete, fail = sender_module.complete, sender_module.fail_batches

    def late_complete(*args: Any) -> None:
        time.sleep(HANDOFF_DELAY_S)
        complete(*args)

    def late_fail(*args: Any) -> None:
        time.sleep(HANDOFF_DELAY_S)
        fail(*args)

    monkeypatch.setattr(sender_module, "complete", late_complete)
    monkeypatch.setattr(sender_module, "fail_batches", late_fail)


@pytest.mark.usefixtures("slow_handoff")
def test_flush_returns_with_every_future_done() -> None:
    broker = FakeBroker()
    broker.create_topic("t", 2)
    producer = Producer(broker, linger_ms=0)
    try:
        futures = [producer.send("t", f"v{i}".encode(), partition=i % 2) for i in range(4)]
        producer.flush(10_000)
        assert [future.done() for future in futures] == [True] * 4
        assert all(future.exception(timeout=0) is None for future in futures)
    finally:
        producer.close(5_000)


@pytest.mark.usefixtures("slow_handoff")
def test_flush_from_another_thread_sees_the_futures_done() -> None:
    broker = FakeBroker()
    broker.create_topic("t", 1)
    producer = Producer(broker, linger_ms=0)
    try:
        future = producer.send("t", b"one", partition=0)
        seen: list[bool] = []
        flusher = threading.Thread(
            target=lambda: (producer.flush(10_000), seen.append(future.done()))
        )
        flusher.start()
        flusher.join(10)
        assert seen == [True]
    finally:
        producer.close(5_000)
