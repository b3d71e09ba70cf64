"""``Producer.metrics()`` and ``Consumer.metrics()`` move as records go, on an embedded broker
(and over gRPC, where a flush is one request)."""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest

from twinlog.engine.base.errors import TwinlogError
from twinlog.engine.base.types import ProduceResult
from twinlog.engine.broker.broker import Broker
from twinlog.rpc.client import Admin, Consumer, Producer
from twinlog.rpc.client.accumulator import ProducerBatch
from twinlog.rpc.client.client_metrics import Mean, ProducerMetrics
from twinlog.rpc.server.config import ServerConfig
from twinlog.rpc.server.server import RpcServer

BATCHES = 10


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with Broker.open(tmp_path / "data") as opened:
        with Admin(opened) as admin:
            admin.create_topic("metered", 1)
        yield opened


def producer_figures(producer: Producer) -> dict[str, float]:
    return producer.metrics()["producer-metrics"]


def test_producer_metrics_move_after_sends(broker: Broker) -> None:
    with Producer(broker, linger_ms=0, buffer_bytes_max=1 << 20) as producer:
        before = producer_figures(producer)
        assert before["record-send-total"] == before["request-total"] == 0
        assert before["buffer-available-bytes"] == before["buffer-total-bytes"] == 1 << 20
        futures = [producer.send("metered", f"v{i}".encode(), partition=0) for i in range(25)]
        producer.flush()
        for future in futures:
            future.result(timeout=10)
        after = producer_figures(producer)
    assert after["record-send-total"] == 25
    assert after["record-error-total"] == 0
    assert after["request-total"] >= 1
    assert after["request-latency-avg"] > 0
    assert after["request-latency-max"] >= after["request-latency-avg"]
    assert after["batch-size-avg"] > 0
    assert after["buffer-available-bytes"] == 1 << 20  # everything acknowledged: all free


def test_a_flush_to_four_partitions_over_grpc_is_one_request(tmp_path: Path) -> None:
    with Broker.open(tmp_path / "data") as broker:
        broker.create_topic("spread", 4)
        server = RpcServer(broker, ServerConfig(port=0))
        server.start()
        try:
            with Producer(server.address, linger_ms=60_000) as producer:
                futures = [producer.send("spread", b"v", partition=p) for p in range(4)]
                producer.flush(10_000)
                for future in futures:
                    future.result(timeout=10)
                figures = producer_figures(producer)
        finally:
            server.stop(grace_ms=0)
    assert (figures["record-send-total"], figures["request-total"]) == (4, 1)


def test_failed_records_are_counted_as_errors(broker: Broker) -> None:
    with Admin(broker) as admin:
        admin.create_topic("remade", 8)
        with Producer(broker, linger_ms=0) as producer:
            producer.send("remade", b"kept", partition=7).result(timeout=10)
            # The producer knows 8 partitions; the topic made again has one.
            admin.delete_topic("remade")
            admin.create_topic("remade", 1)
            doomed = producer.send("remade", b"nowhere", partition=7)
            with pytest.raises(TwinlogError):
                doomed.result(timeout=10)
            figures = producer_figures(producer)
    assert figures["record-error-total"] == 1
    assert figures["record-send-total"] == 1


def test_consumer_metrics_count_records_bytes_fetches_and_lag(broker: Broker) -> None:
    with Producer(broker, linger_ms=0) as producer:
        for index in range(BATCHES):  # one batch each
            producer.send("metered", f"record {index}".encode(), partition=0)
            producer.flush()
    # A fetch this small brings one batch: the other BATCHES - 1 records are the lag.
    with Consumer(broker, fetch_max_bytes=1) as consumer:
        consumer.assign([("metered", 0)])
        consumer.seek_to_beginning()
        first = consumer.poll(5_000)
        figures = consumer.metrics()["consumer-fetch-manager-metrics"]
        assert len(first) == 1
        assert figures["records-consumed-total"] == 1
        assert figures["records-lag-max"] == BATCHES - 1
        assert figures["bytes-consumed-total"] > 0
        assert figures["fetch-total"] >= 1 and figures["fetch-latency-avg"] >= 0
        received = len(first)
        deadline = time.monotonic() + 10
        while received < BATCHES and time.monotonic() < deadline:
            received += len(consumer.poll(500))
        figures = consumer.metrics()["consumer-fetch-manager-metrics"]
    assert figures["records-consumed-total"] == BATCHES
    assert figures["records-lag-max"] == 0


def test_a_measured_pipe_times_answers_and_counts_bytes() -> None:
    answers: list[Future[ProduceResult]] = []

    class HeldPipe:
        def submit(
            self,
            topic: str,
            partition: int,
            batch: bytes,
            transaction_id: int = -1,
            current_leader_epoch: int = -1,
        ) -> Future[ProduceResult]:
            answers.append(Future())
            return answers[-1]

        @property
        def requests_sent(self) -> int:
            return len(answers)

        def close(self) -> None:
            pass

    metrics = ProducerMetrics(100, lambda: 40)
    pipe = metrics.measure(HeldPipe())  # type: ignore[arg-type]
    pipe.submit("t", 0, b"x" * 30)
    pipe.submit("t", 0, b"x" * 10)
    figures = metrics.snapshot()["producer-metrics"]
    assert (figures["request-total"], figures["batch-size-avg"], figures["batch-size-max"]) == (
        2,
        20,
        30,
    )
    assert figures["request-latency-avg"] == 0  # no answer yet
    assert figures["buffer-available-bytes"] == 60
    time.sleep(0.01)
    answers[0].set_result(ProduceResult(0))
    assert metrics.snapshot()["producer-metrics"]["request-latency-max"] >= 10


def test_mean_of_nothing_is_zero() -> None:
    mean = Mean()
    assert (mean.average, mean.maximum, mean.count) == (0.0, 0.0, 0)
    mean.add(2)
    mean.add(4)
    assert (mean.average, mean.maximum, mean.count) == (3.0, 4.0, 2)


def _reachable_batches(root: object, depth: int = 10) -> list[ProducerBatch]:
    """The producer batches reachable from ``root`` by references (closures included)."""
    seen = {id(root)}
    frontier = [root]
    found: list[ProducerBatch] = []
    for _ in range(depth):
        reached = []
        for held in frontier:
            for referent in gc.get_referents(held):
                if id(referent) in seen or isinstance(referent, type):
                    continue
                seen.add(id(referent))
                reached.append(referent)
                if isinstance(referent, ProducerBatch):
                    found.append(referent)
        frontier = reached
    return found


def test_a_future_held_after_its_batch_is_answered_holds_none_of_the_batch(
    broker: Broker,
) -> None:
    """The metrics' callback on the batch's result let go of the batch once it counted it:
    an application holding a million futures must not hold every batch's bytes too."""
    with Producer(broker, linger_ms=0) as producer:
        future = producer.send("metered", b"x" * 100_000, partition=0)
        batch_future = producer.send_batch("metered", 0, [b"y" * 100_000])
        producer.flush()
        future.result(10)
        batch_future.result(10)
        gc.collect()
        assert _reachable_batches(future) == []
        assert _reachable_batches(batch_future) == []
        assert producer_figures(producer)["record-send-total"] == 2
