"""Records fail with RequestTimedOutError at their delivery deadline, on an embedded broker
whose produce hangs: the one in flight ("may or may not have been written") and the one
queued behind it ("never sent"); flush() and close() without a timeout stay bounded."""

from __future__ import annotations

import threading
import time

import pytest
from rpc_fakes import FakeBroker

from twinlog.engine.base.errors import InvalidTxnStateError, RequestTimedOutError
from twinlog.engine.base.types import ProduceResult
from twinlog.rpc.client import Producer

DELIVERY_TIMEOUT_MS = 600
HANG_S = 10.0  # the hanging produce gives up after this, so no thread outlives the test


class HangingBroker(FakeBroker):
    def __init__(self) -> None:
        super().__init__()
        self.hanging = threading.Event()
        self.answer = threading.Event()

    def produce(
        self,
        topic: str,
        partition: int,
        batch: bytes,
        attempt: str = "",
        transaction_id: int = -1,
        current_leader_epoch: int = -1,
    ) -> ProduceResult:
        self.hanging.set()
        self.answer.wait(HANG_S)
        return super().produce(topic, partition, batch, attempt, transaction_id)


def test_in_flight_and_queued_records_expire_at_their_deadline() -> None:
    broker = HangingBroker()
    broker.create_topic("t", 1)
    producer = Producer(
        broker, linger_ms=0, request_timeout_ms=100, delivery_timeout_ms=DELIVERY_TIMEOUT_MS
    )
    try:
        started_s = time.monotonic()
        in_flight = producer.send("t", b"sent", partition=0)
        assert broker.hanging.wait(5)
        queued = producer.send("t", b"behind", partition=0)  # the partition is busy
        error = in_flight.exception(timeout=5)
        elapsed_s = time.monotonic() - started_s
        assert isinstance(error, RequestTimedOutError), error
        assert DELIVERY_TIMEOUT_MS / 1000 * 0.95 <= elapsed_s < DELIVERY_TIMEOUT_MS / 1000 + 1
        assert "1 record(s) for t-0 expired after delivery_timeout_ms=600" in str(error)
        assert "may or may not have been written" in str(error)
        queued_error = queued.exception(timeout=5)
        assert isinstance(queued_error, RequestTimedOutError)
        assert "never sent" in str(queued_error)
        flushing_s = time.monotonic()
        producer.flush()  # everything has its outcome: at once
        assert time.monotonic() - flushing_s < 0.5
        late = producer.send("t", b"late", partition=0)
        closing_s = time.monotonic()
        producer.close()  # bounded by the late record's delivery deadline
        assert time.monotonic() - closing_s < DELIVERY_TIMEOUT_MS / 1000 + 1.5
        assert isinstance(late.exception(timeout=0), (RequestTimedOutError, InvalidTxnStateError))
    finally:
        broker.answer.set()
        producer.close(timeout_ms=0)


def test_flush_with_a_timeout_says_what_is_still_waiting() -> None:
    broker = HangingBroker()
    broker.create_topic("t", 1)
    producer = Producer(broker, linger_ms=0, request_timeout_ms=100, delivery_timeout_ms=5_000)
    try:
        future = producer.send("t", b"x", partition=0)
        assert broker.hanging.wait(5)
        started_s = time.monotonic()
        with pytest.raises(RequestTimedOutError, match="flush\\(\\) did not complete"):
            producer.flush(timeout_ms=200)
        assert 0.15 <= time.monotonic() - started_s < 1.0
        assert not future.done()  # it still has its delivery time
        broker.answer.set()
        assert future.result(timeout=5).offset == 0
    finally:
        broker.answer.set()
        producer.close(timeout_ms=2_000)


def test_a_transaction_with_an_expired_record_can_only_be_aborted() -> None:
    broker = HangingBroker()
    broker.create_topic("t", 1)
    producer = Producer(
        broker,
        transactional_id="expiring",
        linger_ms=0,
        request_timeout_ms=100,
        delivery_timeout_ms=DELIVERY_TIMEOUT_MS,
    )
    try:
        producer.init_transactions()
        producer.begin_transaction()
        future = producer.send("t", b"x", partition=0)
        assert broker.hanging.wait(5)
        started_s = time.monotonic()
        with pytest.raises(RequestTimedOutError, match="expired after delivery_timeout_ms"):
            producer.commit_transaction()
        assert time.monotonic() - started_s < DELIVERY_TIMEOUT_MS / 1000 + 1
        assert isinstance(future.exception(timeout=0), RequestTimedOutError)
        broker.answer.set()
        producer.abort_transaction(timeout_ms=5_000)
    finally:
        broker.answer.set()
        producer.close(timeout_ms=2_000)
