"""Pipelined produce to a cluster: each batch on the produce stream of its partition's leader.

``ClusterProducePipe.submit`` looks the partition's leader up (``route``, which may
refresh the metadata), and submits the batch on that leader's own pipe (a
``ProduceStream`` per broker address, opened on first use). It does not retry: the
producer's sender already retries retriable errors with the batch's bytes unchanged
(producer id, generation, sequence), within its delivery timeout, so a retry that
reaches a new leader holding the first attempt is answered as a duplicate, never
written twice. What this pipe adds is where the retry goes: an answer that says the
leader moved or vanished (``ROUTING_ERRORS``) marks the metadata stale before the
sender sees it, so the retry is routed by fresh metadata.

Thread rule: ``submit`` and ``close`` from any thread.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future

from twinlog.engine.base.errors import (
    BrokerUnavailableError,
    FencedLeaderEpochError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
    TwinlogError,
    UnknownLeaderEpochError,
)
from twinlog.engine.base.types import ProduceResult
from twinlog.engine.records.batch_format import NO_PARTITION_LEADER_EPOCH, NO_TRANSACTION_ID
from twinlog.rpc.client.produce_stream import BatchToSend, ProducePipe

# Answers that mean "ask again where the partition leads now": refresh the metadata.
ROUTING_ERRORS: tuple[type[TwinlogError], ...] = (
    NotLeaderOrFollowerError,
    FencedLeaderEpochError,
    UnknownLeaderEpochError,
    NotEnoughReplicasError,
    BrokerUnavailableError,
)
# ... and a request that timed out: the leader may be stalled (a paused process, a link
# that swallows bytes) and replaced meanwhile, so the next attempt asks for fresh metadata
# (Kafka's client disconnects such a node). Not sent again by the router itself: the
# call's deadline is spent, and the caller's retry (by sequence, for a producer) decides.
STALE_METADATA_ERRORS: tuple[type[TwinlogError], ...] = (*ROUTING_ERRORS, RequestTimedOutError)


class ClusterProducePipe:
    def __init__(
        self,
        route: Callable[[str, int], tuple[str, int]],
        open_pipe_at: Callable[[str], ProducePipe],
        on_routing_error: Callable[[str, TwinlogError], None],
    ) -> None:
        """``route(topic, partition)``: the leader's address and epoch; ``open_pipe_at(address)``: a
        pipe to it; ``on_routing_error(address, error)``: mark the metadata stale (and
        the broker at ``address`` suspect, when it timed out or was unreachable)."""
        self._route = route
        self._open_pipe_at = open_pipe_at
        self._on_routing_error = on_routing_error
        self._lock = threading.Lock()
        self._pipes: dict[str, ProducePipe] = {}
        self._requests_of_closed = 0  # the pipes' ``requests_sent`` once closed
        self._closed = False

    def submit(
        self,
        topic: str,
        partition: int,
        batch: bytes,
        transaction_id: int = NO_TRANSACTION_ID,
        current_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    ) -> Future[ProduceResult]:
        # ``current_leader_epoch``: the caller's is ignored, the routing's own is sent
        address = ""
        try:
            address, leader_epoch = self._route(topic, partition)
            future = self._pipe_at(address).submit(
                topic, partition, batch, transaction_id, leader_epoch
            )
        except TwinlogError as error:  # no metadata, a closed pipe: the sender decides
            future = Future()
            future.set_exception(error)
        # Registered before the sender's own callback: the metadata is stale by the time
        # the sender schedules its retry.
        future.add_done_callback(lambda done: self._check_answer(address, done))
        return future

    def submit_all(self, batches: Sequence[BatchToSend]) -> list[Future[ProduceResult]]:
        """Each batch to its partition's leader, those of one leader in one ``submit_all``
        of its pipe (one request for a flush's batches there)."""
        futures: list[Future[ProduceResult] | None] = [None] * len(batches)
        by_address: dict[str, list[tuple[int, BatchToSend]]] = {}
        for index, sent in enumerate(batches):
            try:
                address, leader_epoch = self._route(sent.topic, sent.partition)
            except TwinlogError as error:  # no metadata: the sender decides
                failed: Future[ProduceResult] = Future()
                failed.set_exception(error)
                futures[index] = failed
                failed.add_done_callback(lambda done: self._check_answer("", done))
                continue
            # the caller's leader epoch is ignored, the routing's own is sent
            routed = sent._replace(current_leader_epoch=leader_epoch)
            by_address.setdefault(address, []).append((index, routed))
        for address, routed_batches in by_address.items():
            try:
                answers = self._pipe_at(address).submit_all([sent for _, sent in routed_batches])
            except Exception as error:  # a closed pipe, no channel: the sender decides
                failure = (
                    error
                    if isinstance(error, TwinlogError)
                    else BrokerUnavailableError(f"cannot send to {address}: {error!r}")
                )
                answers = []
                for _ in routed_batches:
                    failed = Future()
                    failed.set_exception(failure)
                    answers.append(failed)
            check = functools.partial(self._check_answer, address)
            for (index, _), future in zip(routed_batches, answers, strict=True):
                # Registered before the sender's own callback: the metadata is stale by the
                # time the sender schedules its retry.
                future.add_done_callback(check)
                futures[index] = future
        answered = [future for future in futures if future is not None]
        assert len(answered) == len(batches), "a batch was neither routed nor failed"
        return answered

    def _pipe_at(self, address: str) -> ProducePipe:
        with self._lock:
            if self._closed:
                raise BrokerUnavailableError("the produce pipe is closed")
            pipe = self._pipes.get(address)
            if pipe is None:
                pipe = self._pipes[address] = self._open_pipe_at(address)
            return pipe

    def _check_answer(self, address: str, done: Future[ProduceResult]) -> None:
        if done.cancelled():
            return
        error = done.exception()
        if isinstance(error, STALE_METADATA_ERRORS):
            self._on_routing_error(address, error)

    @property
    def requests_sent(self) -> int:
        """Every broker's pipe's requests: a flush is a request per leader."""
        with self._lock:
            return self._requests_of_closed + sum(p.requests_sent for p in self._pipes.values())

    def close(self, timeout_s: float | None = None) -> None:
        """Close every broker's pipe; ``timeout_s`` bounds them all together."""
        with self._lock:
            self._closed = True
            pipes, self._pipes = list(self._pipes.values()), {}
            self._requests_of_closed += sum(pipe.requests_sent for pipe in pipes)
        deadline_s = None if timeout_s is None else time.monotonic() + timeout_s
        for pipe in pipes:
            remaining_s = None if deadline_s is None else max(0.0, deadline_s - time.monotonic())
            pipe.close(remaining_s)
