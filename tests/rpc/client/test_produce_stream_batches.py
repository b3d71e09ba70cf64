"""A pipe's batches for several partitions go in one ProduceStream request (``more``):
one message each way for a producer's flush. Fake gRPC calls stand in for the server:
one that answers every batch, an older one that answers only the first, one that refuses
the whole request, and one that refuses the stream (the batches then go unary, one each).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

import grpc
import pytest

from twinlog.engine.base.errors import (
    BatchTooLargeError,
    InvalidConfigError,
    NotEnoughResourcesError,
    NotLeaderOrFollowerError,
)
from twinlog.engine.base.types import ProduceResult
from twinlog.engine.broker.broker import Broker
from twinlog.rpc.client import Producer
from twinlog.rpc.client.cluster_pipe import ClusterProducePipe
from twinlog.rpc.client.produce_stream import (
    MORE_FIELDS_BYTES_MAX,
    REQUEST_BATCHES_BYTES_MAX,
    REQUEST_BATCHES_MAX,
    BatchToSend,
    ExecutorPipe,
    ProducePipe,
    ProduceStream,
)
from twinlog.rpc.generated.twinlog.v1 import produce_pb2
from twinlog.rpc.wire.errors import describe

WAIT_S = 5.0  # bound of every wait here

Answer = Callable[[produce_pb2.ProduceRequest], produce_pb2.ProduceResponse]


def answer_all(request: produce_pb2.ProduceRequest) -> produce_pb2.ProduceResponse:
    """Each batch's base offset: its partition times 10."""
    response = produce_pb2.ProduceResponse(
        correlation_id=request.correlation_id, base_offset=request.partition * 10
    )
    for each in request.more:
        response.more.add(base_offset=each.partition * 10)
    return response


class FakeCall:
    """A stream whose server answers each request with ``answer`` as it comes."""

    def __init__(self, requests: Iterator[produce_pb2.ProduceRequest], answer: Answer) -> None:
        self._requests = requests
        self._answer = answer
        self.received: list[produce_pb2.ProduceRequest] = []

    def __iter__(self) -> FakeCall:
        return self

    def __next__(self) -> produce_pb2.ProduceResponse:
        for request in self._requests:  # ends when the client half-closes
            self.received.append(request)
            return self._answer(request)
        raise StopIteration

    def cancel(self) -> None:
        pass


class Opener:
    def __init__(self, answer: Answer = answer_all) -> None:
        self.answer = answer
        self.calls: list[FakeCall] = []

    def __call__(self, requests: Iterator[Any], metadata: Any = None) -> FakeCall:
        call = FakeCall(requests, self.answer)
        self.calls.append(call)
        return call


def batches(sizes: list[int]) -> list[BatchToSend]:
    return [BatchToSend("t", n, b"x" * size) for n, size in enumerate(sizes)]


def test_a_flush_of_four_partitions_is_one_request_answered_in_order() -> None:
    opener = Opener()
    stream = ProduceStream(opener, ())
    try:
        futures = stream.submit_all(batches([10, 20, 30, 40]))
        assert [f.result(timeout=WAIT_S).base_offset for f in futures] == [0, 10, 20, 30]
    finally:
        stream.close()
    assert stream.requests_sent == 1  # the producer's request-total
    (request,) = opener.calls[0].received
    assert (request.partition, [each.partition for each in request.more]) == (0, [1, 2, 3])
    assert [len(each.batch) for each in request.more] == [20, 30, 40]


def test_batches_beyond_the_request_bytes_max_go_in_the_next_request() -> None:
    opener = Opener()
    stream = ProduceStream(opener, ())
    # a third of the request's bytes each, with its topic and fields: three fit, not four
    third = REQUEST_BATCHES_BYTES_MAX // 3 - 4 * len("t") - MORE_FIELDS_BYTES_MAX
    try:
        futures = stream.submit_all(batches([third, third, third, third, 10]))
        assert [f.result(timeout=WAIT_S).base_offset for f in futures] == [0, 10, 20, 30, 40]
    finally:
        stream.close()
    sent = [[r.partition, *(each.partition for each in r.more)] for r in opener.calls[0].received]
    assert sent == [[0, 1, 2], [3, 4]]


def test_more_batches_than_a_request_takes_go_in_the_next_request() -> None:
    opener = Opener()
    stream = ProduceStream(opener, ())
    try:
        futures = stream.submit_all(batches([1] * (REQUEST_BATCHES_MAX + 1)))
        assert futures[-1].result(timeout=WAIT_S).base_offset == REQUEST_BATCHES_MAX * 10
    finally:
        stream.close()
    assert [1 + len(r.more) for r in opener.calls[0].received] == [REQUEST_BATCHES_MAX, 1]


def test_a_batch_too_large_for_the_client_fails_alone() -> None:
    opener = Opener()
    stream = ProduceStream(opener, ())
    try:
        futures = stream.submit_all(batches([10, 65 * 1024 * 1024, 10]))
        assert isinstance(futures[1].exception(timeout=WAIT_S), BatchTooLargeError)
        assert [futures[0].result(timeout=WAIT_S).base_offset] == [0]
        assert [futures[2].result(timeout=WAIT_S).base_offset] == [20]
    finally:
        stream.close()
    (request,) = opener.calls[0].received
    assert [each.partition for each in request.more] == [2]


def test_an_older_server_answering_the_first_batch_only_gets_the_others_one_by_one() -> None:
    """A server that takes one batch per request (it ignores ``more``) answers the first;
    the others go again, each alone, and so does every later request on that stream."""

    def first_only(request: produce_pb2.ProduceRequest) -> produce_pb2.ProduceResponse:
        return produce_pb2.ProduceResponse(
            correlation_id=request.correlation_id, base_offset=request.partition * 10
        )

    opener = Opener(first_only)
    stream = ProduceStream(opener, ())
    try:
        futures = stream.submit_all(batches([1, 1, 1]))
        assert [f.result(timeout=WAIT_S).base_offset for f in futures] == [0, 10, 20]
        later = stream.submit_all(batches([1, 1]))
        assert [f.result(timeout=WAIT_S).base_offset for f in later] == [0, 10]
    finally:
        stream.close()
    sent = [(r.partition, len(r.more)) for r in opener.calls[0].received]
    assert sent == [(0, 2), (1, 0), (2, 0), (0, 0), (1, 0)]


def refusing_whole(error: BaseException) -> Answer:
    """A server that refuses every request of several batches whole with ``error`` (as
    its DecodeGuard does), and answers a request of one batch."""
    refusal = describe(error)

    def answer(request: produce_pb2.ProduceRequest) -> produce_pb2.ProduceResponse:
        if request.more:
            return produce_pb2.ProduceResponse(
                correlation_id=request.correlation_id, base_offset=-1, error=refusal.to_proto()
            )
        return answer_all(request)

    return answer


def test_a_request_refused_whole_for_its_size_goes_again_one_batch_each() -> None:
    """A server whose request_bytes_max is below the batches together (but not below
    each): the batches go again alone, and are written."""
    opener = Opener(refusing_whole(BatchTooLargeError("the request exceeds request_bytes_max")))
    stream = ProduceStream(opener, ())
    try:
        futures = stream.submit_all(batches([1, 1, 1]))
        assert [f.result(timeout=WAIT_S).base_offset for f in futures] == [0, 10, 20]
    finally:
        stream.close()
    sent = [(r.partition, len(r.more)) for r in opener.calls[0].received]
    assert sent == [(0, 2), (0, 0), (1, 0), (2, 0)]


def test_a_request_refused_whole_otherwise_fails_every_batch_with_it() -> None:
    opener = Opener(refusing_whole(InvalidConfigError("the request is not a valid message")))
    stream = ProduceStream(opener, ())
    try:
        futures = stream.submit_all(batches([1, 1, 1]))
        for future in futures:
            error = future.exception(timeout=WAIT_S)
            assert isinstance(error, InvalidConfigError) and "not a valid message" in str(error)
    finally:
        stream.close()
    assert len(opener.calls[0].received) == 1


class RefusedStream(grpc.RpcError):
    """The server's answer to a stream past its limit: RESOURCE_EXHAUSTED, nothing read."""

    description = describe(NotEnoughResourcesError("3 produce streams are open"))

    def code(self) -> grpc.StatusCode:
        return self.description.code

    def details(self) -> str:
        return self.description.message

    def trailing_metadata(self) -> tuple[tuple[str, str], ...]:
        return self.description.trailing_metadata()


class RefusingCall(FakeCall):
    def __next__(self) -> produce_pb2.ProduceResponse:
        for request in self._requests:
            self.received.append(request)
            raise RefusedStream()
        raise StopIteration


class UnaryCall:
    """A unary call's future, answered at once."""

    def __init__(self, response: produce_pb2.ProduceResponse) -> None:
        self.response = response

    def result(self) -> produce_pb2.ProduceResponse:
        return self.response

    def add_done_callback(self, callback: Callable[[UnaryCall], None]) -> None:
        callback(self)


class Unary:
    def __init__(self) -> None:
        self.requests: list[produce_pb2.ProduceRequest] = []
        self.lock = threading.Lock()

    def future(self, request: produce_pb2.ProduceRequest, **_: Any) -> UnaryCall:
        with self.lock:
            self.requests.append(request)
        return UnaryCall(produce_pb2.ProduceResponse(base_offset=request.partition * 10))


def test_a_refused_stream_sends_each_batch_of_a_request_as_a_unary_call() -> None:
    def open_refusing(requests: Iterator[Any], metadata: Any = None) -> RefusingCall:
        return RefusingCall(requests, answer_all)

    unary = Unary()
    stream = ProduceStream(open_refusing, (), unary=unary)
    try:
        futures = stream.submit_all(batches([1, 2, 3]))
        assert [f.result(timeout=WAIT_S).base_offset for f in futures] == [0, 10, 20]
    finally:
        stream.close()
    assert stream.requests_sent == 1 + 3  # the refused stream's request, then a unary call each
    assert [(r.partition, len(r.batch), len(r.more)) for r in unary.requests] == [
        (0, 1, 0),
        (1, 2, 0),
        (2, 3, 0),
    ]


class RecordingPipe:
    """An embedded broker's pipe that records how its batches were handed over."""

    def __init__(self, broker: Broker) -> None:
        self.inner = ExecutorPipe(broker)
        self.handed: list[list[tuple[str, int]]] = []

    def submit(self, *arguments: Any) -> Future[ProduceResult]:
        self.handed.append([(arguments[0], arguments[1])])
        return self.inner.submit(*arguments)

    def submit_all(self, sent: list[BatchToSend]) -> list[Future[ProduceResult]]:
        self.handed.append([(each.topic, each.partition) for each in sent])
        return self.inner.submit_all(sent)

    @property
    def requests_sent(self) -> int:
        return self.inner.requests_sent

    def close(self, timeout_s: float | None = None) -> None:
        self.inner.close(timeout_s)


class PipedBroker:
    """An embedded broker whose produce pipe is a ``RecordingPipe``."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self.pipe = RecordingPipe(broker)

    def open_produce_stream(self) -> ProducePipe:
        return self.pipe

    def __getattr__(self, name: str) -> Any:
        return getattr(self._broker, name)


def test_a_producers_flush_hands_every_partitions_batch_over_at_once(tmp_path: Any) -> None:
    with Broker.open(tmp_path / "data") as broker:
        broker.create_topic("orders", 4)
        piped = PipedBroker(broker)
        producer = Producer(piped, transactional_id="flusher", linger_ms=60_000)  # type: ignore[arg-type]
        try:
            producer.init_transactions()
            producer.begin_transaction()
            for n in range(8):
                producer.send("orders", b"v%d" % n, partition=n % 4)
            producer.flush(int(WAIT_S * 1000))
            producer.commit_transaction()
        finally:
            producer.close()
        assert piped.pipe.handed == [[("orders", p) for p in range(4)]]
        assert piped.pipe.requests_sent == 4  # an embedded broker's: a produce call each
        deadline_s = time.monotonic() + WAIT_S  # the commit answers before the copies
        ends: list[int] = []
        while ends != [2, 2, 2, 2] and time.monotonic() < deadline_s:
            time.sleep(0.01)
            ends = [broker.fetch("orders", p, 0).log_end_offset for p in range(4)]
        assert ends == [2, 2, 2, 2]


@pytest.mark.parametrize("count", [0, 1])
def test_submit_all_of_no_batch_or_one_is_as_submit(count: int) -> None:
    opener = Opener()
    stream = ProduceStream(opener, ())
    try:
        futures = stream.submit_all(batches([7] * count))
        assert [f.result(timeout=WAIT_S).base_offset for f in futures] == [0] * count
    finally:
        stream.close()
    received = opener.calls[0].received if opener.calls else []
    assert [len(r.more) for r in received] == [0] * count


class HeldPipe:
    """A leader's pipe that records each hand-over and answers as told."""

    def __init__(self, answer: Callable[[BatchToSend], Future[ProduceResult]]) -> None:
        self.answer = answer
        self.handed: list[list[tuple[int, int]]] = []

    def submit(self, *arguments: Any) -> Future[ProduceResult]:
        return self.submit_all([BatchToSend(*arguments)])[0]

    def submit_all(self, sent: list[BatchToSend]) -> list[Future[ProduceResult]]:
        self.handed.append([(each.partition, each.current_leader_epoch) for each in sent])
        return [self.answer(each) for each in sent]

    @property
    def requests_sent(self) -> int:
        return len(self.handed)

    def close(self, timeout_s: float | None = None) -> None:
        pass


def test_a_cluster_pipe_hands_each_leader_its_batches_at_once() -> None:
    leaders = {0: "a:1", 1: "b:1", 2: "a:1", 3: "b:1", 4: "a:1"}

    def route(topic: str, partition: int) -> tuple[str, int]:
        if partition == 5:
            raise NotLeaderOrFollowerError("no leader known for t-5")
        return leaders[partition], 40 + partition

    def answer(sent: BatchToSend) -> Future[ProduceResult]:
        future: Future[ProduceResult] = Future()
        if sent.partition == 3:
            future.set_exception(NotLeaderOrFollowerError("b:1 leads t-3 no more"))
        else:
            future.set_result(ProduceResult(sent.partition * 10))
        return future

    pipes = {address: HeldPipe(answer) for address in ("a:1", "b:1")}
    stale: list[str] = []
    pipe = ClusterProducePipe(route, pipes.__getitem__, lambda address, _: stale.append(address))
    futures = pipe.submit_all(batches([1] * 6))
    assert pipes["a:1"].handed == [[(0, 40), (2, 42), (4, 44)]]  # the routing's epochs
    assert pipes["b:1"].handed == [[(1, 41), (3, 43)]]
    assert [f.result().base_offset for f in (futures[0], futures[1], futures[2], futures[4])] == [
        0,
        10,
        20,
        40,
    ]
    assert isinstance(futures[3].exception(), NotLeaderOrFollowerError)
    assert isinstance(futures[5].exception(), NotLeaderOrFollowerError)
    assert sorted(stale) == ["", "b:1"]  # both marked the metadata stale
    assert pipe.requests_sent == 2  # a request per leader
    pipe.close()
    assert pipe.requests_sent == 2  # still counted once the pipes are closed


class FailingOncePipe(RecordingPipe):
    """A pipe whose first hand-over raises, as a pipe broken by a bug would."""

    def __init__(self, broker: Broker) -> None:
        super().__init__(broker)
        self.failures_left = 1

    def submit_all(self, sent: list[BatchToSend]) -> list[Future[ProduceResult]]:
        if self.failures_left:
            self.failures_left -= 1
            raise RuntimeError("the pipe broke")
        return super().submit_all(sent)


def test_a_pipe_that_raises_fails_the_batches_it_was_given_and_the_sender_goes_on(
    tmp_path: Any,
) -> None:
    with Broker.open(tmp_path / "data") as broker:
        broker.create_topic("orders", 2)
        piped = PipedBroker(broker)
        piped.pipe = FailingOncePipe(broker)
        producer = Producer(piped, linger_ms=60_000)  # type: ignore[arg-type]
        try:
            lost = [producer.send("orders", b"lost", partition=p) for p in range(2)]
            producer.flush(int(WAIT_S * 1000))
            for future in lost:
                error = future.exception(timeout=WAIT_S)
                assert error is not None and "the pipe broke" in str(error)
            kept = producer.send("orders", b"kept", partition=0)
            producer.flush(int(WAIT_S * 1000))
            assert kept.result(timeout=WAIT_S).offset >= 0
        finally:
            producer.close()
