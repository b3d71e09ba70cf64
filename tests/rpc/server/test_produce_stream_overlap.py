"""A produce stream's requests are produced side by side and answered in order."""

from __future__ import annotations

import threading
import time
from typing import Any

from twinlog.engine.base.errors import UnknownTopicOrPartitionError
from twinlog.engine.base.types import ProduceResult
from twinlog.engine.records.batch_builder import build_batch
from twinlog.rpc.generated.twinlog.v1 import produce_pb2
from twinlog.rpc.policy.auth import Guard, Principal
from twinlog.rpc.server.config import ServerConfig
from twinlog.rpc.server.service_produce import MORE_BATCHES_MAX, ProducingService

PRODUCE_S = 0.3  # each produce waits this long, as a journal sync would


class SlowBroker:
    def __init__(self) -> None:
        self.at_once = 0
        self.at_once_max = 0
        self.lock = threading.Lock()

    def produce(self, topic: str, partition: int, batch: bytes, **_: Any) -> ProduceResult:
        with self.lock:
            self.at_once += 1
            self.at_once_max = max(self.at_once_max, self.at_once)
        time.sleep(PRODUCE_S if partition != 0 else PRODUCE_S * 2)  # the first is slowest
        with self.lock:
            self.at_once -= 1
        if topic == "missing":
            raise UnknownTopicOrPartitionError("topic 'missing' does not exist")
        return ProduceResult(partition * 100)


def test_four_partitions_are_produced_at_once_and_answered_in_request_order() -> None:
    broker = SlowBroker()
    service = ProducingService(broker, Guard(None, None, False), ServerConfig())  # type: ignore[arg-type]
    batch = build_batch([b"v"], "none")
    requests = [
        produce_pb2.ProduceRequest(
            topic="missing" if n == 2 else "t", partition=n, batch=batch, correlation_id=n + 1
        )
        for n in range(4)
    ]
    answers = list(service._answer_stream(Principal("anonymous"), iter(requests)))
    assert [a.correlation_id for a in answers] == [1, 2, 3, 4]  # in order, the slow first too
    assert [a.base_offset for a in answers] == [0, 100, -1, 300]
    assert answers[2].error.name == "UnknownTopicOrPartitionError"
    assert broker.at_once_max == 4  # one after another: 1


def test_a_request_with_more_is_answered_once_its_batches_produced_side_by_side() -> None:
    """A producer's flush in one request: its four batches are produced at once, one
    refused alone, and answered in one response, each in its place."""
    broker = SlowBroker()
    service = ProducingService(broker, Guard(None, None, False), ServerConfig())  # type: ignore[arg-type]
    batch = build_batch([b"v"], "none")
    request = produce_pb2.ProduceRequest(topic="t", partition=0, batch=batch, correlation_id=7)
    for n in range(1, 4):
        request.more.add(topic="missing" if n == 2 else "t", partition=n, batch=batch)
    after = produce_pb2.ProduceRequest(topic="t", partition=5, batch=batch, correlation_id=8)
    answers = list(service._answer_stream(Principal("anonymous"), iter([request, after])))
    assert [a.correlation_id for a in answers] == [7, 8]
    first = answers[0]
    assert first.base_offset == 0 and not first.HasField("error")
    assert [a.base_offset for a in first.more] == [100, -1, 300]
    assert [a.error.name for a in first.more] == ["", "UnknownTopicOrPartitionError", ""]
    assert [a.base_offset for a in answers[1].more] == [] and answers[1].base_offset == 500
    assert broker.at_once_max >= 4  # the four of the first request side by side


def test_a_batch_in_more_with_more_of_its_own_is_refused_alone() -> None:
    broker = SlowBroker()
    service = ProducingService(broker, Guard(None, None, False), ServerConfig())  # type: ignore[arg-type]
    batch = build_batch([b"v"], "none")
    request = produce_pb2.ProduceRequest(topic="t", partition=0, batch=batch, correlation_id=1)
    nested = request.more.add(topic="t", partition=1, batch=batch)
    nested.more.add(topic="t", partition=2, batch=batch)
    request.more.add(topic="t", partition=3, batch=batch)
    (answer,) = service._answer_stream(Principal("anonymous"), iter([request]))
    assert answer.base_offset == 0 and [a.base_offset for a in answer.more] == [-1, 300]
    refusal = answer.more[0].error
    assert refusal.name == "InvalidRequestError" and "more batches of its own" in refusal.message
    assert refusal.fatal


def test_a_request_with_more_batches_than_the_server_takes_is_refused_whole() -> None:
    """Each batch in ``more`` costs the server a task and an answer: past
    ``MORE_BATCHES_MAX`` the request is refused before any is produced."""
    broker = SlowBroker()
    service = ProducingService(broker, Guard(None, None, False), ServerConfig())  # type: ignore[arg-type]
    request = produce_pb2.ProduceRequest(topic="t", partition=0, correlation_id=3)
    for _ in range(MORE_BATCHES_MAX + 1):
        request.more.add()  # two bytes each on the wire
    (answer,) = service._answer_stream(Principal("anonymous"), iter([request]))
    assert answer.correlation_id == 3 and answer.base_offset == -1 and not answer.more
    assert (
        answer.error.name == "InvalidRequestError" and str(MORE_BATCHES_MAX) in answer.error.message
    )
    assert broker.at_once_max == 0  # nothing produced


def test_a_stopping_server_ends_the_stream_after_answering_what_it_took() -> None:
    """The requests taken before ``end_streams`` are answered, then the stream ends; one
    read after the end is neither produced nor answered (the producer sends it again)."""
    broker = SlowBroker()
    produced: list[int] = []
    produce = broker.produce

    def counted_produce(topic: str, partition: int, batch: bytes, **rest: Any) -> ProduceResult:
        produced.append(partition)
        return produce(topic, partition, batch, **rest)

    broker.produce = counted_produce  # type: ignore[method-assign]
    service = ProducingService(broker, Guard(None, None, False), ServerConfig())  # type: ignore[arg-type]
    batch = build_batch([b"v"], "none")
    taken, ended = threading.Event(), threading.Event()

    def requests() -> Any:
        yield produce_pb2.ProduceRequest(topic="t", partition=1, batch=batch, correlation_id=1)
        taken.set()
        assert ended.wait(10), "the test never ended the streams"
        yield produce_pb2.ProduceRequest(topic="t", partition=2, batch=batch, correlation_id=2)

    answers: list[Any] = []
    stream = threading.Thread(
        target=lambda: answers.extend(service._answer_stream(Principal("anonymous"), requests()))
    )
    stream.start()
    assert taken.wait(10), "the first request was never read"
    service.end_streams()
    ended.set()
    stream.join(10)
    assert not stream.is_alive(), "the stream did not end"
    assert [a.correlation_id for a in answers] == [1]
    time.sleep(PRODUCE_S)  # a produce of the second request would have begun by now
    assert produced == [1]
    # A stream opened once the server is stopping ends at once, having taken nothing.
    assert list(service._answer_stream(Principal("anonymous"), iter([]))) == []
