"""twinlog.v1.Producing on top of a broker.

Batches go to the broker as the client encoded them; the broker checks the CRC.
With an ACL file, every transaction request needs WRITE on its transactional id
(``twinlog.rpc.policy.producer_access``), so one principal cannot begin, commit, abort or fence
another's transactions.
Thread rule: one instance serves every worker thread; its one mutable state is the set
of open produce streams, under its lock, which a stopping server ends (``end_streams``);
a produce stream's reader and workers are the stream's own.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import grpc

from twinlog.engine.base.errors import InvalidRequestError, NotEnoughResourcesError
from twinlog.rpc.generated.twinlog.v1 import produce_pb2, produce_pb2_grpc
from twinlog.rpc.policy.auth import Guard, Operation, Principal, Resource
from twinlog.rpc.policy.producer_access import TransactionalAccess
from twinlog.rpc.server.call import log_failure, principal_of, unary
from twinlog.rpc.server.config import ServerConfig
from twinlog.rpc.server.decode import UndecodableRequest
from twinlog.rpc.wire.broker_api import BrokerApi
from twinlog.rpc.wire.convert import (
    counts_from_proto,
    leader_epoch_of_wire,
    offsets_from_proto,
    topic_partitions_from_proto,
    transaction_id_of_wire,
)
from twinlog.rpc.wire.errors import describe
from twinlog.rpc.wire.group_convert import member_from_proto

log = logging.getLogger(__name__)

# Requests of one produce stream handled at once (answered in order), and the stream's
# worker threads: a producer has at most one batch per partition in flight, so these are
# journaled side by side, the batches of one request (its ``more``) among them.
STREAM_REQUESTS_IN_FLIGHT = 8
# Batches in one request's ``more`` at most: a request of more is refused whole (a 2-byte
# empty batch each, one request could otherwise queue millions of answers).
MORE_BATCHES_MAX = 4096


class _StreamEnd:
    """How a stopping server ends one open produce stream: the requests its reader has
    taken are answered, then the stream ends (the producer sends the rest again on a new
    stream, as after any stream the server ended); a request read after the end is
    neither produced nor answered. The reader takes each request under ``lock``."""

    def __init__(self, answers: queue.SimpleQueue[Any]) -> None:
        # Re-entrant: a second signal's stop runs on the thread a first one may be ending
        # streams on.
        self.lock = threading.RLock()
        self.ended = False
        self._answers = answers

    def end(self) -> None:
        with self.lock:
            if not self.ended:
                self.ended = True
                self._answers.put(None)  # after every answer queued: those go first


class ProducingService(produce_pb2_grpc.ProducingServicer):
    def __init__(self, broker: BrokerApi, guard: Guard, config: ServerConfig) -> None:
        self.broker = broker
        self.guard = guard
        self.access = TransactionalAccess(guard, broker)
        # A produce stream holds a worker thread while open: past this many, streams are
        # refused (the client falls back to unary Produce) so that the other calls get threads.
        self.streams_max = config.produce_streams_limit
        self._stream_slots = (
            threading.BoundedSemaphore(self.streams_max) if self.streams_max else None
        )
        # The open produce streams, and whether the server is stopping (a stream opened
        # after ``end_streams`` ends at once). A producer's stream is open as long as the
        # producer: without this a stop waits out its whole grace for an idle one.
        self._streams_lock = threading.RLock()  # re-entrant: see ``_StreamEnd.lock``
        self._open_streams: set[_StreamEnd] = set()
        self._streams_ending = False

    def end_streams(self) -> None:
        """End every open produce stream once the requests it has taken are answered (a
        stopping server, after it refused new calls)."""
        with self._streams_lock:
            self._streams_ending = True
            open_streams = list(self._open_streams)
        for stream in open_streams:
            stream.end()

    def _produce(
        self, principal: Principal, request: produce_pb2.ProduceRequest
    ) -> produce_pb2.ProduceResponse:
        if isinstance(request, UndecodableRequest):
            raise request.error()
        self.guard.require(principal, Operation.WRITE, (request.topic,))
        # Its size: request_bytes_max was held before decoding (DecodeGuard), its topic's
        # limit is held by the broker, as for the Kafka door.
        batch = request.batch  # each access copies the bytes (7 us per 256 KiB): once
        self.access.require_batch(principal, batch)
        result = self.broker.produce(
            request.topic,
            request.partition,
            batch,
            attempt=request.attempt,
            transaction_id=transaction_id_of_wire(request.transaction_id),
            current_leader_epoch=leader_epoch_of_wire(request),
        )
        return produce_pb2.ProduceResponse(
            base_offset=result.base_offset,
            duplicate=result.duplicate,
            correlation_id=request.correlation_id,
        )

    @unary
    def InitProducer(
        self, request: produce_pb2.InitProducerRequest, context: grpc.ServicerContext
    ) -> produce_pb2.InitProducerResponse:
        principal = principal_of(self.guard, context)
        identity = self.access.init_producer(
            principal, request.transactional_id or None, request.transaction_timeout_ms or None
        )
        return produce_pb2.InitProducerResponse(
            producer_id=identity.producer_id, producer_generation=identity.producer_generation
        )

    @unary
    def Produce(
        self, request: produce_pb2.ProduceRequest, context: grpc.ServicerContext
    ) -> produce_pb2.ProduceResponse:
        principal = principal_of(self.guard, context)
        if not isinstance(request, UndecodableRequest) and request.more:
            raise InvalidRequestError(
                f"a Produce call carries {len(request.more)} more batches: ProduceRequest.more "
                "is answered on ProduceStream only; send each batch in a Produce call of its "
                "own, or them together on ProduceStream. Nothing was written"
            )
        return self._produce(principal, request)

    def ProduceStream(
        self, request_iterator: Iterator[produce_pb2.ProduceRequest], context: grpc.ServicerContext
    ) -> Iterator[produce_pb2.ProduceResponse]:
        slots = self._stream_slots
        try:
            principal = principal_of(self.guard, context)
            if slots is None or not slots.acquire(blocking=False):
                raise NotEnoughResourcesError(
                    f"{self.streams_max} produce streams are open, the server's limit "
                    "(produce_streams_max): send unary Produce requests, or retry later"
                )
        except Exception as error:
            log_failure("ProduceStream", error)
            description = describe(error)
            context.set_trailing_metadata(description.trailing_metadata())
            context.abort(description.code, description.message)
        assert slots is not None  # abort raised otherwise
        try:
            yield from self._answer_stream(principal, request_iterator)
        finally:
            slots.release()

    def _answer_stream(
        self, principal: Principal, request_iterator: Iterator[produce_pb2.ProduceRequest]
    ) -> Iterator[produce_pb2.ProduceResponse]:
        """Up to ``STREAM_REQUESTS_IN_FLIGHT`` requests of the stream are produced at once
        and answered in the order they came: a producer's batches for different partitions
        are journaled side by side, their syncs overlapping, instead of one after another.
        A request's ``more`` batches (a producer's flush) are produced beside its first and
        answered in the same response, each in its place of the response's ``more``; each
        is checked on its own (ACLs, the batch), so one refused fails alone. A client keeps
        at most one batch per partition in flight, so this never reorders a partition's
        batches."""
        answers: queue.SimpleQueue[list[Future[produce_pb2.ProduceResponse]] | None] = (
            queue.SimpleQueue()
        )
        slots = threading.Semaphore(STREAM_REQUESTS_IN_FLIGHT)
        stream = _StreamEnd(answers)
        workers = ThreadPoolExecutor(
            max_workers=STREAM_REQUESTS_IN_FLIGHT, thread_name_prefix="produce-stream"
        )

        def answer(
            request: produce_pb2.ProduceRequest, nested: bool = False
        ) -> produce_pb2.ProduceResponse:
            try:
                if nested and request.more:
                    raise InvalidRequestError(
                        "a batch in ProduceRequest.more carries more batches of its own: "
                        "put every batch of the request in the outer request's more; this "
                        "one was not written"
                    )
                return self._produce(principal, request)
            except Exception as error:
                log_failure("ProduceStream", error)
                return produce_pb2.ProduceResponse(
                    base_offset=-1,
                    correlation_id=0 if nested else request.correlation_id,
                    error=describe(error).to_proto(),
                )

        def refused(
            request: produce_pb2.ProduceRequest, count: int
        ) -> Future[produce_pb2.ProduceResponse]:
            error = InvalidRequestError(
                f"a produce request carries {count} more batches, above the server's "
                f"{MORE_BATCHES_MAX}: send fewer per request; none of them was written"
            )
            log_failure("ProduceStream", error)
            whole: Future[produce_pb2.ProduceResponse] = Future()
            whole.set_result(
                produce_pb2.ProduceResponse(
                    base_offset=-1,
                    correlation_id=request.correlation_id,
                    error=describe(error).to_proto(),
                )
            )
            return whole

        def read() -> None:
            try:
                for request in request_iterator:
                    slots.acquire()  # released when its answer is sent
                    more = () if isinstance(request, UndecodableRequest) else request.more
                    with stream.lock:  # taken whole before the end, or not at all
                        if stream.ended:
                            break
                        if len(more) > MORE_BATCHES_MAX:
                            answers.put([refused(request, len(more))])
                            continue
                        answers.put(
                            [workers.submit(answer, request)]
                            + [workers.submit(answer, each, True) for each in more]
                        )
            except Exception as error:  # the call ended under us (cancelled, server stop)
                log.debug("produce stream ended while reading: %s", error)
            finally:
                answers.put(None)

        reader = threading.Thread(target=read, name="produce-stream-reader", daemon=True)
        reader.start()
        # Registered once nothing can fail before the ``finally`` that forgets it; a request
        # the reader took meanwhile is queued before the end, and answered.
        with self._streams_lock:
            self._open_streams.add(stream)
            ending = self._streams_ending
        if ending:
            stream.end()
        try:
            while (pending := answers.get()) is not None:
                response = pending[0].result()
                response.more.extend(each.result() for each in pending[1:])
                slots.release()
                yield response
        finally:
            # The call ended (or was cancelled): a reader waiting for a slot goes on to
            # the request iterator, which ends too; a produce under way finishes alone.
            for _ in range(STREAM_REQUESTS_IN_FLIGHT):
                slots.release()
            # Those not started are dropped: the client learns the call ended, and sends
            # them again (with the same sequences: a batch written meanwhile is a duplicate).
            workers.shutdown(wait=False, cancel_futures=True)
            with self._streams_lock:
                self._open_streams.discard(stream)

    @unary
    def BeginTransaction(
        self, request: produce_pb2.BeginTransactionRequest, context: grpc.ServicerContext
    ) -> produce_pb2.BeginTransactionResponse:
        principal = principal_of(self.guard, context)
        self.access.require_producer(principal, request.producer_id)
        transaction_id = self.broker.begin_transaction(
            request.producer_id, request.producer_generation, request.request_id
        )
        return produce_pb2.BeginTransactionResponse(transaction_id=transaction_id)

    @unary
    def AddPartitionsToTransaction(
        self, request: produce_pb2.AddPartitionsToTransactionRequest, context: grpc.ServicerContext
    ) -> produce_pb2.Empty:
        principal = principal_of(self.guard, context)
        partitions = topic_partitions_from_proto(request.partitions)
        self.guard.require(principal, Operation.WRITE, sorted({tp.topic for tp in partitions}))
        ref = request.transaction
        self.access.require_producer(principal, ref.producer_id)
        self.broker.add_partitions_to_transaction(
            ref.transaction_id, ref.producer_id, ref.producer_generation, partitions
        )
        return produce_pb2.Empty()

    @unary
    def SendOffsetsToTransaction(
        self, request: produce_pb2.SendOffsetsToTransactionRequest, context: grpc.ServicerContext
    ) -> produce_pb2.Empty:
        principal = principal_of(self.guard, context)
        offsets = offsets_from_proto(request.offsets)
        self.guard.require(principal, Operation.READ, sorted({tp.topic for tp in offsets}))
        ref = request.transaction
        self.access.require_producer(principal, ref.producer_id)
        # Before the broker's KIP-447 fence, which aborts (or fences) whichever transaction
        # holds these offsets: only a principal that may read the group may get that far.
        self.guard.require(principal, Operation.READ, (request.group_id,), Resource.GROUP)
        self.broker.send_offsets_to_transaction(
            ref.transaction_id,
            ref.producer_id,
            ref.producer_generation,
            request.group_id,
            offsets,
            member_from_proto(request.member if request.HasField("member") else None),
        )
        return produce_pb2.Empty()

    @unary
    def CommitTransaction(
        self, request: produce_pb2.EndTransactionRequest, context: grpc.ServicerContext
    ) -> produce_pb2.Empty:
        principal = principal_of(self.guard, context)
        ref = request.transaction
        self.access.require_producer(principal, ref.producer_id)
        self.broker.commit_transaction(
            ref.transaction_id,
            ref.producer_id,
            ref.producer_generation,
            wait_for_applied=request.wait_for_applied,
            attempts=list(request.attempts) if request.select_attempts else None,
            batches_written=counts_from_proto(request.batches_written) or None,
        )
        return produce_pb2.Empty()

    @unary
    def AbortTransaction(
        self, request: produce_pb2.EndTransactionRequest, context: grpc.ServicerContext
    ) -> produce_pb2.Empty:
        principal = principal_of(self.guard, context)
        ref = request.transaction
        self.access.require_producer(principal, ref.producer_id)
        self.broker.abort_transaction(ref.transaction_id, ref.producer_id, ref.producer_generation)
        return produce_pb2.Empty()
