"""Pipelined produce: submit batches without waiting, get a future per batch.

``ProduceStream`` keeps one gRPC ProduceStream call open: requests are written
as they are submitted, and a reader thread resolves the futures from the
responses (the server answers in order, each with its correlation id). When the
call breaks (server restart), every pending future fails with the mapped error
(BrokerUnavailableError, retriable) and the next submit opens a new call.
A server that has as many streams open as it allows refuses a new one
(NotEnoughResourcesError, nothing read from it): its requests, and those of the
next ``UNARY_FALLBACK_S``, go as unary Produce calls instead (pipelined as well:
each is an asynchronous call with its own future).

``ExecutorPipe`` gives the same interface over an embedded broker.

Thread rule: ``submit`` and ``close`` may be called from any thread.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol

import grpc

from twinlog.engine.base.errors import (
    BatchTooLargeError,
    BrokerUnavailableError,
    NotEnoughResourcesError,
)
from twinlog.engine.base.types import ProduceResult
from twinlog.rpc.client.request_size import check_produce_size
from twinlog.rpc.generated.twinlog.v1 import produce_pb2
from twinlog.rpc.wire.broker_api import BrokerApi
from twinlog.rpc.wire.errors import error_from_proto, error_from_rpc_error

EMBEDDED_SENDER_THREADS = 4
UNARY_FALLBACK_S = 5.0  # after the server refused a stream, how long to send unary calls

Waiting = tuple[produce_pb2.ProduceRequest, "Future[ProduceResult]"]


class ProducePipe(Protocol):
    def submit(self, topic: str, partition: int, batch: bytes) -> Future[ProduceResult]: ...

    def close(self) -> None: ...


class _Call:
    """One open ProduceStream call and the futures still waiting for its answers."""

    def __init__(
        self,
        method: Callable[..., Any],
        metadata: tuple[tuple[str, str], ...],
        on_refused: Callable[[list[Waiting]], None] | None = None,
    ) -> None:
        self.requests: queue.SimpleQueue[produce_pb2.ProduceRequest | None] = queue.SimpleQueue()
        self.pending: dict[int, Waiting] = {}
        self.lock = threading.Lock()
        self.broken = False
        self.on_refused = on_refused
        self.responses = method(self._request_iterator(), metadata=metadata)
        self.reader = threading.Thread(
            target=self._read, name="twinlog-produce-stream", daemon=True
        )
        self.reader.start()

    def _request_iterator(self) -> Iterator[produce_pb2.ProduceRequest]:
        while True:
            request = self.requests.get()
            if request is None:
                return
            yield request

    def _read(self) -> None:
        failure: Exception
        try:
            for response in self.responses:
                with self.lock:
                    waiting = self.pending.pop(response.correlation_id, None)
                if waiting is None:
                    continue
                future = waiting[1]
                if response.HasField("error"):
                    future.set_exception(error_from_proto(response.error))
                else:
                    future.set_result(ProduceResult(response.base_offset, response.duplicate))
            failure = BrokerUnavailableError("the produce stream was closed by the server; retry")
        except grpc.RpcError as error:
            failure = error_from_rpc_error(error)
        with self.lock:
            self.broken = True
            pending, self.pending = self.pending, {}
        self.requests.put(None)  # ends the request iterator, and with it gRPC's sending thread
        if isinstance(failure, NotEnoughResourcesError) and self.on_refused is not None:
            self.on_refused(list(pending.values()))  # the server read none of them
            return
        for _, future in pending.values():
            future.set_exception(failure)

    def close(self) -> None:
        self.requests.put(None)
        self.reader.join(timeout=5)
        if self.reader.is_alive():
            self.responses.cancel()


class ProduceStream:
    def __init__(
        self,
        method: Callable[..., Any],
        metadata: tuple[tuple[str, str], ...],
        unary: Any = None,
        unary_timeout_s: float | None = None,
    ) -> None:
        """``unary``: the Produce method, for when the server refuses another stream."""
        self._method = method
        self._metadata = metadata
        self._unary = unary
        self._unary_timeout_s = unary_timeout_s
        self._unary_until_s = 0.0
        self._lock = threading.Lock()
        self._call: _Call | None = None
        self._correlation_ids = itertools.count(1)
        self._closed = False

    def submit(self, topic: str, partition: int, batch: bytes) -> Future[ProduceResult]:
        future: Future[ProduceResult] = Future()
        try:
            check_produce_size(topic, batch)
        except BatchTooLargeError as error:  # as a refusal from the server: in the future
            future.set_exception(error)
            return future
        with self._lock:
            if self._closed:
                raise BrokerUnavailableError("the produce stream is closed")
            correlation_id = next(self._correlation_ids)
            request = produce_pb2.ProduceRequest(
                topic=topic, partition=partition, batch=batch, correlation_id=correlation_id
            )
            if time.monotonic() < self._unary_until_s:
                call = None
            else:
                call = self._call
                if call is None or call.broken:
                    on_refused = self._refused if self._unary is not None else None
                    call = self._call = _Call(self._method, self._metadata, on_refused)
                with call.lock:
                    if call.broken:  # broke between the check and now: fail fast, caller retries
                        future.set_exception(
                            BrokerUnavailableError("the produce stream broke; retry")
                        )
                        return future
                    call.pending[correlation_id] = (request, future)
                call.requests.put(request)
        if call is None:
            self._send_unary(request, future)
        return future

    def _refused(self, waiting: list[Waiting]) -> None:
        """The server has no room for another stream: send unary calls for a while."""
        with self._lock:
            self._unary_until_s = time.monotonic() + UNARY_FALLBACK_S
        for request, future in waiting:
            self._send_unary(request, future)

    def _send_unary(
        self, request: produce_pb2.ProduceRequest, future: Future[ProduceResult]
    ) -> None:
        assert self._unary is not None

        def done(call: grpc.Future) -> None:
            try:
                response = call.result()
            except grpc.RpcError as error:
                future.set_exception(error_from_rpc_error(error))
            except Exception as error:  # cancelled
                future.set_exception(BrokerUnavailableError(f"produce call ended: {error!r}"))
            else:
                future.set_result(ProduceResult(response.base_offset, response.duplicate))

        try:
            call = self._unary.future(
                request, timeout=self._unary_timeout_s, metadata=self._metadata
            )
        except Exception as error:  # a closed channel, say
            future.set_exception(BrokerUnavailableError(f"cannot send a produce call: {error!r}"))
            return
        call.add_done_callback(done)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            call, self._call = self._call, None
        if call is not None:
            call.close()


class ExecutorPipe:
    """The same interface over an embedded broker: a few threads call ``broker.produce``."""

    def __init__(self, broker: BrokerApi, threads: int = EMBEDDED_SENDER_THREADS) -> None:
        self._broker = broker
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="twinlog-produce")

    def submit(self, topic: str, partition: int, batch: bytes) -> Future[ProduceResult]:
        return self._executor.submit(self._broker.produce, topic, partition, batch)

    def close(self) -> None:
        self._executor.shutdown(wait=True)


def open_pipe(broker: BrokerApi) -> ProducePipe:
    opener = getattr(broker, "open_produce_stream", None)
    if opener is not None:
        pipe: ProducePipe = opener()
        return pipe
    return ExecutorPipe(broker)
