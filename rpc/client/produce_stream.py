"""Pipelined produce: submit batches without waiting, get a future per batch.

``ProduceStream`` keeps one gRPC ProduceStream call open: requests are written
as they are submitted, and a reader thread resolves the futures from the
responses (the server answers in order, each with its correlation id). When the
call breaks (server restart), every pending future fails with the mapped error
(BrokerUnavailableError, retriable) and the next submit opens a new call.
Each request must be answered within ``request_timeout_s``: a watchdog thread (asleep
until the oldest unanswered request's deadline) fails every pending future with
RequestTimedOutError (retriable) and cancels the call when one is not, so a stalled
server or a connection that swallows bytes never holds a batch forever; the next
submit opens a new call.
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
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, InvalidStateError, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import grpc

from twinlog.engine.base.errors import (
    BatchTooLargeError,
    BrokerUnavailableError,
    InvalidConfigError,
    InvalidRequestError,
    NotEnoughResourcesError,
    RequestTimedOutError,
)
from twinlog.engine.base.types import ProduceResult
from twinlog.engine.records.batch_format import NO_PARTITION_LEADER_EPOCH, NO_TRANSACTION_ID
from twinlog.rpc.client.request_size import check_produce_size
from twinlog.rpc.generated.twinlog.v1 import produce_pb2
from twinlog.rpc.wire.broker_api import BrokerApi
from twinlog.rpc.wire.convert import wire_transaction_id, with_leader_epoch
from twinlog.rpc.wire.errors import error_from_proto, error_from_rpc_error

EMBEDDED_SENDER_THREADS = 4
UNARY_FALLBACK_S = 5.0  # after the server refused a stream, how long to send unary calls
CLOSE_WAIT_S = 5.0  # how long close() lets the server answer what is pending
REQUEST_TIMEOUT_S_DEFAULT = 30.0

# The batches of one flush go in one request up to this many bytes together (a larger
# batch goes alone): far below any server's request_bytes_max (16 MiB by default, and no
# lower than its largest batch), so a request of small batches is never refused for its
# size. Not more: the server measures each request (protobuf's ByteSize serializes it),
# which costs 26 us at 256 KiB and 470 us at 1 MiB on the development machine.
REQUEST_BATCHES_BYTES_MAX = 256 * 1024
# ... and this many batches at most (the server refuses more than MORE_BATCHES_MAX).
REQUEST_BATCHES_MAX = 1000
# What a batch in ``more`` adds to a request besides its batch and topic (tags, lengths,
# partition, transaction id, leader epoch), at most.
MORE_FIELDS_BYTES_MAX = 40
# A request refused whole with one of these came with no ``more`` answers on purpose
# (the server's DecodeGuard, or its cap on ``more``); any other answer lacking them is an
# older server's, which answers the first batch only.
WHOLE_REQUEST_REFUSALS = frozenset(
    {BatchTooLargeError.__name__, InvalidConfigError.__name__, InvalidRequestError.__name__}
)


class BatchToSend(NamedTuple):
    """One batch for a pipe: its partition, its bytes, its transaction."""

    topic: str
    partition: int
    batch: bytes
    transaction_id: int = NO_TRANSACTION_ID
    current_leader_epoch: int = NO_PARTITION_LEADER_EPOCH


Waiting = tuple[produce_pb2.ProduceRequest, "Future[ProduceResult]"]


class ProducePipe(Protocol):
    def submit(
        self,
        topic: str,
        partition: int,
        batch: bytes,
        transaction_id: int = NO_TRANSACTION_ID,
        current_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    ) -> Future[ProduceResult]: ...

    def submit_all(self, batches: Sequence[BatchToSend]) -> list[Future[ProduceResult]]:
        """``submit`` of several batches, each for another partition: a future each, in
        order. A pipe may send them in one request."""
        ...

    @property
    def requests_sent(self) -> int:
        """Produce requests sent so far: a flush's batches sent together count once, a
        batch sent again counts again (the producer's ``request-total``)."""
        ...

    def close(self, timeout_s: float | None = None) -> None: ...


@dataclass
class _Pending:
    request: produce_pb2.ProduceRequest  # with its ``more``: one answer for each
    futures: list[Future[ProduceResult]]  # the request's, then one per ``more``
    deadline_s: float  # monotonic: the answer must come before this

    def waiting(self) -> list[Waiting]:
        """Each batch as a request of its own, with its future (to send them unary)."""
        first = produce_pb2.ProduceRequest()
        first.CopyFrom(self.request)
        first.ClearField("more")
        return list(zip([first, *self.request.more], self.futures, strict=True))


class _Call:
    """One open ProduceStream call and the futures still waiting for its answers."""

    def __init__(
        self,
        method: Callable[..., Any],
        metadata: tuple[tuple[str, str], ...],
        request_timeout_s: float = REQUEST_TIMEOUT_S_DEFAULT,
        on_refused: Callable[[list[Waiting]], None] | None = None,
        on_unanswered: Callable[[list[Waiting], bool], None] | None = None,
    ) -> None:
        """``on_refused``: the server refused the stream, having read none of its requests;
        ``on_unanswered(batches, older_server)``: batches of a request the server did not
        answer, to send again one per request."""
        self.requests: queue.SimpleQueue[produce_pb2.ProduceRequest | None] = queue.SimpleQueue()
        self.pending: dict[int, _Pending] = {}  # in the order sent, so answered
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)  # pending grew, or the call broke
        self.broken = False
        self.request_timeout_s = request_timeout_s
        self.on_refused = on_refused
        self.on_unanswered = on_unanswered
        self.responses = method(self._request_iterator(), metadata=metadata)
        self.reader = threading.Thread(
            target=self._read, name="twinlog-produce-stream", daemon=True
        )
        self.reader.start()
        self.watchdog = threading.Thread(
            target=self._watch, name="twinlog-produce-watchdog", daemon=True
        )
        self.watchdog.start()

    def add(
        self,
        correlation_id: int,
        request: produce_pb2.ProduceRequest,
        futures: list[Future[ProduceResult]],
    ) -> bool:
        """Lock held. Register a request about to be sent, with the future of each of its
        batches; False if the call is broken."""
        if self.broken:
            return False
        deadline_s = time.monotonic() + self.request_timeout_s
        self.pending[correlation_id] = _Pending(request, futures, deadline_s)
        if len(self.pending) == 1:  # the watchdog sleeps without a deadline only when empty
            self.changed.notify_all()
        return True

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
                unanswered, older_server = _resolve(waiting, response)
                if unanswered and self.on_unanswered is not None:
                    self.on_unanswered(unanswered, older_server)
                else:
                    error = BrokerUnavailableError("the server did not answer this batch")
                    for _request, future in unanswered:
                        _fail(future, error)
            failure = BrokerUnavailableError("the produce stream was closed by the server; retry")
        except grpc.RpcError as error:
            failure = error_from_rpc_error(error)
        with self.lock:
            self.broken = True
            pending, self.pending = self.pending, {}
            self.changed.notify_all()  # the watchdog ends
        self.requests.put(None)  # ends the request iterator, and with it gRPC's sending thread
        if isinstance(failure, NotEnoughResourcesError) and self.on_refused is not None:
            # the server read none of them
            self.on_refused([each for item in pending.values() for each in item.waiting()])
            return
        for item in pending.values():
            for future in item.futures:
                _fail(future, failure)

    def _watch(self) -> None:
        """Fail everything pending, and cancel the call, once a request goes unanswered
        past its deadline. Sleeps until the oldest pending request's deadline (or until
        a request is added); no polling."""
        with self.changed:
            while not self.broken:
                oldest = next(iter(self.pending.values()), None)
                if oldest is None:
                    self.changed.wait()
                    continue
                remaining_s = oldest.deadline_s - time.monotonic()
                if remaining_s > 0:
                    self.changed.wait(remaining_s)
                    continue
                self.broken = True
                pending, self.pending = self.pending, {}
                break
            else:
                return
        self.requests.put(None)
        self.responses.cancel()  # the reader ends with CANCELLED; nothing is left for it
        timeout_ms = round(self.request_timeout_s * 1000)
        error = RequestTimedOutError(
            f"no answer on the produce stream within request_timeout_ms={timeout_ms}: "
            "the server is stalled or unreachable; the batch may or may not have been "
            "written (the stream was cancelled; the next send opens a new one)"
        )
        for item in pending.values():
            for future in item.futures:
                _fail(future, error)

    def close(self, timeout_s: float | None = None) -> None:
        """Half-close, give the server ``timeout_s`` (at most CLOSE_WAIT_S) to answer what is
        pending, then cancel."""
        self.requests.put(None)
        wait_s = CLOSE_WAIT_S if timeout_s is None else max(0.0, min(CLOSE_WAIT_S, timeout_s))
        self.reader.join(timeout=wait_s)
        if self.reader.is_alive():
            self.responses.cancel()


def _resolve(
    waiting: _Pending, response: produce_pb2.ProduceResponse
) -> tuple[list[Waiting], bool]:
    """Each batch's future from its answer: the response for the request's first batch,
    its ``more`` for the others, in order. Returns the batches left unanswered, to send
    again one per request, and whether an older server left them so:

    - a request refused whole for its size (over the server's ``request_bytes_max``):
      every batch, each of which fits alone;
    - a request refused whole otherwise (undecodable, too many batches): every batch
      fails with that refusal, none is left;
    - an older server, which answers the first batch only: the others (and this
      stream sends one batch per request from then on)."""
    futures = waiting.futures
    answers = [response, *response.more]
    if len(answers) != len(futures):
        refusal = response.error.name if response.HasField("error") else ""
        if refusal in WHOLE_REQUEST_REFUSALS and not response.more:
            if refusal == BatchTooLargeError.__name__ and len(futures) > 1:
                return waiting.waiting(), False
            answers = [response] * len(futures)
        else:
            _answer(futures[0], response)
            return waiting.waiting()[1:], True
    for future, answer in zip(futures, answers, strict=True):
        _answer(future, answer)
    return [], False


def _answer(future: Future[ProduceResult], answer: produce_pb2.ProduceResponse) -> None:
    if answer.HasField("error"):
        _fail(future, error_from_proto(answer.error))
    else:
        _succeed(future, ProduceResult(answer.base_offset, answer.duplicate))


def _succeed(future: Future[ProduceResult], result: ProduceResult) -> None:
    try:
        future.set_result(result)
    except InvalidStateError:
        pass


def _fail(future: Future[ProduceResult], error: BaseException) -> None:
    """Fail ``future`` unless it is already resolved (the reader and the watchdog may race)."""
    try:
        future.set_exception(error)
    except InvalidStateError:
        pass


class ProduceStream:
    def __init__(
        self,
        method: Callable[..., Any],
        metadata: tuple[tuple[str, str], ...],
        unary: Any = None,
        request_timeout_s: float = REQUEST_TIMEOUT_S_DEFAULT,
    ) -> None:
        """``unary``: the Produce method, for when the server refuses another stream;
        ``request_timeout_s``: the deadline of each request, on the stream or unary."""
        self._method = method
        self._metadata = metadata
        self._unary = unary
        self._request_timeout_s = request_timeout_s
        self._unary_until_s = 0.0
        self._lock = threading.Lock()
        self._call: _Call | None = None
        self._correlation_ids = itertools.count(1)
        self._closed = False
        self._one_per_request = False  # the server answers one batch per request only
        # Its own lock, never held while futures are completed (the stream's is: a future's
        # callback may read the count, through the producer's metrics).
        self._count_lock = threading.Lock()
        self._requests_sent = 0

    def submit(
        self,
        topic: str,
        partition: int,
        batch: bytes,
        transaction_id: int = NO_TRANSACTION_ID,
        current_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    ) -> Future[ProduceResult]:
        sent = BatchToSend(topic, partition, batch, transaction_id, current_leader_epoch)
        return self.submit_all([sent])[0]

    def submit_all(self, batches: Sequence[BatchToSend]) -> list[Future[ProduceResult]]:
        """The batches in as few requests as ``REQUEST_BATCHES_BYTES_MAX`` allows, each
        request's first batch with the others in its ``more`` (one message each way for a
        producer's flush, as Kafka's ProduceRequest carries every partition of a broker)."""
        futures: list[Future[ProduceResult]] = [Future() for _ in batches]
        request: produce_pb2.ProduceRequest | None = None
        request_futures: list[Future[ProduceResult]] = []
        request_bytes = 0
        for sent, future in zip(batches, futures, strict=True):
            try:
                check_produce_size(sent.topic, sent.batch)
            except BatchTooLargeError as error:  # as a refusal from the server: in the future
                future.set_exception(error)
                continue
            size_bytes = len(sent.batch) + 4 * len(sent.topic) + MORE_FIELDS_BYTES_MAX
            if request is not None and (
                self._one_per_request
                or request_bytes + size_bytes > REQUEST_BATCHES_BYTES_MAX
                or len(request_futures) >= REQUEST_BATCHES_MAX
            ):
                self._send(request, request_futures)
                request = None
            if request is None:
                request, request_futures, request_bytes = produce_pb2.ProduceRequest(), [], 0
                _fill(request, sent)
            else:
                _fill(request.more.add(), sent)
            request_futures.append(future)
            request_bytes += size_bytes
        if request is not None:
            self._send(request, request_futures)
        return futures

    def _send(
        self, request: produce_pb2.ProduceRequest, futures: list[Future[ProduceResult]]
    ) -> None:
        """On the open call (one opened if none is), else unary calls, one per batch. Never
        raises: a failure to send fails the request's futures."""
        try:
            self._send_or_raise(request, futures)
        except Exception as error:  # a closed channel, a thread that cannot start
            failure = BrokerUnavailableError(f"cannot send a produce request: {error!r}")
            for future in futures:
                _fail(future, failure)

    def _send_or_raise(
        self, request: produce_pb2.ProduceRequest, futures: list[Future[ProduceResult]]
    ) -> None:
        with self._lock:
            if self._closed:
                error = BrokerUnavailableError("the produce stream is closed")
                for future in futures:
                    _fail(future, error)
                return
            request.correlation_id = next(self._correlation_ids)
            if time.monotonic() < self._unary_until_s:
                call = None
            else:
                call = self._call
                if call is None or call.broken:
                    on_refused = self._refused if self._unary is not None else None
                    call = self._call = _Call(
                        self._method,
                        self._metadata,
                        self._request_timeout_s,
                        on_refused,
                        self._unanswered,
                    )
                with call.lock:
                    if not call.add(request.correlation_id, request, futures):
                        # broke between the check and now: fail fast, the caller retries
                        error = BrokerUnavailableError("the produce stream broke; retry")
                        for future in futures:
                            _fail(future, error)
                        return
                call.requests.put(request)
                with self._count_lock:
                    self._requests_sent += 1
        if call is None:
            waiting = _Pending(request, futures, 0.0).waiting()
            for single, future in waiting:
                self._send_unary(single, future)

    def _unanswered(self, waiting: list[Waiting], older_server: bool) -> None:
        """Batches the server left unanswered (``_resolve``): each again, alone."""
        if older_server:
            self._one_per_request = True
        for request, future in waiting:
            self._send(request, [future])

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
                request, timeout=self._request_timeout_s, metadata=self._metadata
            )
        except Exception as error:  # a closed channel, say
            future.set_exception(BrokerUnavailableError(f"cannot send a produce call: {error!r}"))
            return
        with self._count_lock:
            self._requests_sent += 1
        call.add_done_callback(done)

    @property
    def requests_sent(self) -> int:
        with self._count_lock:
            return self._requests_sent

    def close(self, timeout_s: float | None = None) -> None:
        with self._lock:
            self._closed = True
            call, self._call = self._call, None
        if call is not None:
            call.close(timeout_s)


class ExecutorPipe:
    """The same interface over an embedded broker: a few threads call ``broker.produce``."""

    def __init__(self, broker: BrokerApi, threads: int = EMBEDDED_SENDER_THREADS) -> None:
        self._broker = broker
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="twinlog-produce")
        self._lock = threading.Lock()
        self._requests_sent = 0  # a call of ``broker.produce`` each

    def submit(
        self,
        topic: str,
        partition: int,
        batch: bytes,
        transaction_id: int = NO_TRANSACTION_ID,
        current_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    ) -> Future[ProduceResult]:
        future = self._executor.submit(
            self._broker.produce,
            topic,
            partition,
            batch,
            transaction_id=transaction_id,
            current_leader_epoch=current_leader_epoch,
        )
        with self._lock:
            self._requests_sent += 1
        return future

    def submit_all(self, batches: Sequence[BatchToSend]) -> list[Future[ProduceResult]]:
        return [self.submit(*sent) for sent in batches]

    @property
    def requests_sent(self) -> int:
        with self._lock:
            return self._requests_sent

    def close(self, timeout_s: float | None = None) -> None:
        """With a timeout, produce calls still running are not waited for: they end on
        their own (in-process, bounded by the broker), their answers unused."""
        self._executor.shutdown(wait=timeout_s is None)


def _fill(request: produce_pb2.ProduceRequest, sent: BatchToSend) -> None:
    request.topic = sent.topic
    request.partition = sent.partition
    request.batch = sent.batch
    request.transaction_id = wire_transaction_id(sent.transaction_id)
    with_leader_epoch(request, sent.current_leader_epoch)


def open_pipe(broker: BrokerApi) -> ProducePipe:
    opener = getattr(broker, "open_produce_stream", None)
    if opener is not None:
        pipe: ProducePipe = opener()
        return pipe
    return ExecutorPipe(broker)
