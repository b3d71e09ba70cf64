"""Pipelined produce: submit batches without waiting, get a future per batch.

``ProduceStream`` keeps one gRPC ProduceStream call open: requests are written
as they are submitted, and a reader thread resolves the futures from the
responses (the server answers in order, each with its correlation id). When the
call breaks (server restart), every pending future fails with the mapped error
(BrokerUnavailableError, retriable) and the next submit opens a new call.

``ExecutorPipe`` gives the same interface over an embedded broker.

Thread rule: ``submit`` and ``close`` may be called from any thread.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol

import grpc

from engine.errors import BrokerUnavailableError
from engine.types import ProduceResult
from rpc.broker_api import BrokerApi
from rpc.errors import error_from_rpc_error, rebuild
from rpc.generated.twinlog.v1 import produce_pb2

EMBEDDED_SENDER_THREADS = 4


class ProducePipe(Protocol):
    def submit(self, topic: str, partition: int, batch: bytes) -> Future[ProduceResult]: ...

    def close(self) -> None: ...


class _Call:
    """One open ProduceStream call and the futures still waiting for its answers."""

    def __init__(self, method: Callable[..., Any], metadata: tuple[tuple[str, str], ...]) -> None:
        self.requests: queue.SimpleQueue[produce_pb2.ProduceRequest | None] = queue.SimpleQueue()
        self.pending: dict[int, Future[ProduceResult]] = {}
        self.lock = threading.Lock()
        self.broken = False
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
                    future = self.pending.pop(response.correlation_id, None)
                if future is None:
                    continue
                if response.HasField("error"):
                    error = response.error
                    future.set_exception(
                        rebuild(error.name, error.message, error.retriable, error.attributes_json)
                    )
                else:
                    future.set_result(ProduceResult(response.base_offset, response.duplicate))
            failure = BrokerUnavailableError("the produce stream was closed by the server; retry")
        except grpc.RpcError as error:
            failure = error_from_rpc_error(error)
        with self.lock:
            self.broken = True
            pending, self.pending = self.pending, {}
        self.requests.put(None)  # ends the request iterator, and with it gRPC's sending thread
        for future in pending.values():
            future.set_exception(failure)

    def close(self) -> None:
        self.requests.put(None)
        self.reader.join(timeout=5)
        if self.reader.is_alive():
            self.responses.cancel()


class ProduceStream:
    def __init__(self, method: Callable[..., Any], metadata: tuple[tuple[str, str], ...]) -> None:
        self._method = method
        self._metadata = metadata
        self._lock = threading.Lock()
        self._call: _Call | None = None
        self._correlation_ids = itertools.count(1)
        self._closed = False

    def submit(self, topic: str, partition: int, batch: bytes) -> Future[ProduceResult]:
        future: Future[ProduceResult] = Future()
        with self._lock:
            if self._closed:
                raise BrokerUnavailableError("the produce stream is closed")
            call = self._call
            if call is None or call.broken:
                call = self._call = _Call(self._method, self._metadata)
            correlation_id = next(self._correlation_ids)
            with call.lock:
                if call.broken:  # broke between the check and now: fail fast, caller retries
                    future.set_exception(BrokerUnavailableError("the produce stream broke; retry"))
                    return future
                call.pending[correlation_id] = future
            call.requests.put(
                produce_pb2.ProduceRequest(
                    topic=topic, partition=partition, batch=batch, correlation_id=correlation_id
                )
            )
        return future

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
