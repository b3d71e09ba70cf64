"""The produce stream's watchdog: a request unanswered within request_timeout fails its
future with RequestTimedOutError and cancels the stream; answered requests never trip it.
Fake gRPC calls stand in for a server that stalls and one that answers."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from twinlog.engine.base.errors import RequestTimedOutError
from twinlog.rpc.client.produce_stream import ProduceStream
from twinlog.rpc.generated.twinlog.v1 import produce_pb2

REQUEST_TIMEOUT_S = 0.3
WAIT_S = 5.0  # bound of every wait here


class CancelledRpcError(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.CANCELLED

    def details(self) -> str:
        return "Locally cancelled by application!"

    def trailing_metadata(self) -> tuple[()]:
        return ()


class StalledCall:
    """A stream whose server never answers; ends (CANCELLED) only when cancelled."""

    def __init__(self, requests: Iterator[produce_pb2.ProduceRequest]) -> None:
        self.cancelled = threading.Event()

    def __iter__(self) -> StalledCall:
        return self

    def __next__(self) -> produce_pb2.ProduceResponse:
        if self.cancelled.wait(WAIT_S):
            raise CancelledRpcError()
        raise StopIteration

    def cancel(self) -> None:
        self.cancelled.set()


class AnsweringCall(StalledCall):
    """A stream whose server answers each request at once."""

    def __init__(self, requests: Iterator[produce_pb2.ProduceRequest]) -> None:
        super().__init__(requests)
        self._requests = requests

    def __next__(self) -> produce_pb2.ProduceResponse:
        for request in self._requests:  # ends when the client half-closes
            return produce_pb2.ProduceResponse(
                correlation_id=request.correlation_id, base_offset=request.correlation_id
            )
        raise StopIteration


class Opener:
    def __init__(self, kind: type[StalledCall]) -> None:
        self.kind = kind
        self.calls: list[StalledCall] = []

    def __call__(self, requests: Iterator[Any], metadata: Any = None) -> StalledCall:
        call = self.kind(requests)
        self.calls.append(call)
        return call


def test_an_unanswered_request_fails_at_its_deadline_and_the_stream_is_cancelled() -> None:
    opener = Opener(StalledCall)
    stream = ProduceStream(opener, (), request_timeout_s=REQUEST_TIMEOUT_S)
    try:
        started_s = time.monotonic()
        first = stream.submit("t", 0, b"x")
        second = stream.submit("t", 1, b"y")
        with pytest.raises(RequestTimedOutError, match="request_timeout_ms=300"):
            first.result(timeout=WAIT_S)
        elapsed_s = time.monotonic() - started_s
        assert REQUEST_TIMEOUT_S * 0.9 <= elapsed_s < REQUEST_TIMEOUT_S + 1.0, elapsed_s
        assert isinstance(second.exception(timeout=WAIT_S), RequestTimedOutError)
        assert opener.calls[0].cancelled.is_set()
        third = stream.submit("t", 0, b"z")  # a new stream, with its own deadline
        assert len(opener.calls) == 2
        assert isinstance(third.exception(timeout=WAIT_S), RequestTimedOutError)
    finally:
        stream.close(timeout_s=0)


def test_answered_requests_and_an_idle_stream_never_trip_the_watchdog() -> None:
    opener = Opener(AnsweringCall)
    stream = ProduceStream(opener, (), request_timeout_s=REQUEST_TIMEOUT_S)
    try:
        assert stream.submit("t", 0, b"x").result(timeout=WAIT_S).base_offset == 1
        time.sleep(REQUEST_TIMEOUT_S * 2)  # idle, well past a request's deadline
        assert stream.submit("t", 0, b"y").result(timeout=WAIT_S).base_offset == 2
        assert len(opener.calls) == 1 and not opener.calls[0].cancelled.is_set()
    finally:
        stream.close(timeout_s=1)
