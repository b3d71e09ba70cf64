"""twinlog.v1.Consuming on top of a broker: long-poll fetch, offsets, group offsets.

With an ACL file, a group's offsets need READ on the group (``group:`` grants,
``twinlog.rpc.policy.auth``) as well as READ on their topics, as Kafka's OffsetCommit
and OffsetFetch do: reading an input topic does not let one move or see another
principal's position in it.

Fetch answers with the data log's bytes as the broker returns them (whole
batches), never decoded here. A long poll is served in slices of
``long_poll_slice_ms`` so that a shutdown or a cancelled call ends it promptly,
and only while it holds one of the ``LongPollSlots`` (a waiting call holds a
worker thread): without one it is answered with what is there now, or refused
as retriable when that is nothing.

Thread rule: one instance serves every worker thread; ``stopping`` is set by the
server when it begins to shut down.
"""

from __future__ import annotations

import threading
import time

import grpc

from twinlog.engine.base.errors import InvalidConfigError, NotEnoughResourcesError
from twinlog.engine.base.types import FetchResult
from twinlog.rpc.generated.twinlog.v1 import consume_pb2, consume_pb2_grpc
from twinlog.rpc.policy.auth import ANONYMOUS, Guard, Operation, Principal, Resource
from twinlog.rpc.server.call import principal_of, unary
from twinlog.rpc.server.config import ServerConfig
from twinlog.rpc.server.long_poll_slots import LongPollSlots
from twinlog.rpc.wire.broker_api import BrokerApi
from twinlog.rpc.wire.convert import (
    leader_epoch_of_wire,
    offsets_from_proto,
    offsets_to_proto,
    topic_partitions_from_proto,
)
from twinlog.rpc.wire.group_convert import (
    answer_to_proto,
    heartbeat_from_proto,
    member_from_proto,
)

FETCH_MAX_BYTES_DEFAULT = 1 << 20


class ConsumingService(consume_pb2_grpc.ConsumingServicer):
    def __init__(
        self, broker: BrokerApi, guard: Guard, config: ServerConfig, stopping: threading.Event
    ) -> None:
        self.broker = broker
        self.guard = guard
        self.config = config
        self.stopping = stopping
        self.slots = LongPollSlots(
            config.long_polls_limit,
            config.long_polls_per_principal_limit,
            config.long_polls_per_connection_limit,
        )

    def _fetch(
        self, principal: Principal, request: consume_pb2.FetchRequest, context: grpc.ServicerContext
    ) -> FetchResult:
        config = self.config
        max_bytes = min(request.max_bytes or FETCH_MAX_BYTES_DEFAULT, config.fetch_bytes_max)
        min_bytes = max(1, request.min_bytes)
        max_wait_ms = min(max(0, request.max_wait_ms), config.fetch_wait_ms_max)
        if max_wait_ms == 0:
            return self.broker.fetch(
                request.topic,
                request.partition,
                request.offset,
                max_bytes=max_bytes,
                current_leader_epoch=leader_epoch_of_wire(request),
            )
        owner = None if principal.name == ANONYMOUS else principal.name
        connection = context.peer() or "unknown"
        refusal = self.slots.try_take(owner, connection)
        if refusal is not None:
            now = self.broker.fetch(
                request.topic,
                request.partition,
                request.offset,
                max_bytes=max_bytes,
                current_leader_epoch=leader_epoch_of_wire(request),
            )
            if now.records:
                return now
            raise NotEnoughResourcesError(
                f"no records in {request.topic}-{request.partition} from offset "
                f"{request.offset} yet, and this fetch may not wait for them: {refusal}. "
                "Retry after a pause (the consumer does), use fewer idle consumers per "
                "connection, or raise the limit"
            )
        try:
            return self._long_poll(request, context, max_bytes, min_bytes, max_wait_ms)
        finally:
            self.slots.give_back(owner, connection)

    def _long_poll(
        self,
        request: consume_pb2.FetchRequest,
        context: grpc.ServicerContext,
        max_bytes: int,
        min_bytes: int,
        max_wait_ms: int,
    ) -> FetchResult:
        config = self.config
        deadline = time.monotonic() + max_wait_ms / 1000
        while True:
            remaining_ms = max(0, int((deadline - time.monotonic()) * 1000))
            result = self.broker.fetch(
                request.topic,
                request.partition,
                request.offset,
                max_bytes=max_bytes,
                max_wait_ms=min(remaining_ms, config.long_poll_slice_ms),
                min_bytes=min_bytes,
                current_leader_epoch=leader_epoch_of_wire(request),
            )
            if (
                len(result.records) >= min_bytes
                or remaining_ms <= config.long_poll_slice_ms
                or self.stopping.is_set()
                or not context.is_active()
            ):
                return result

    @unary
    def Fetch(
        self, request: consume_pb2.FetchRequest, context: grpc.ServicerContext
    ) -> consume_pb2.FetchResponse:
        principal = principal_of(self.guard, context)
        self.guard.require(principal, Operation.READ, (request.topic,))
        result = self._fetch(principal, request, context)
        return consume_pb2.FetchResponse(
            records=result.records,
            log_start_offset=result.log_start_offset,
            log_end_offset=result.log_end_offset,
        )

    @unary
    def ListOffset(
        self, request: consume_pb2.ListOffsetRequest, context: grpc.ServicerContext
    ) -> consume_pb2.ListOffsetResponse:
        principal = principal_of(self.guard, context)
        self.guard.require(principal, Operation.READ, (request.topic,))
        spec: str | int
        if request.position == consume_pb2.ListOffsetRequest.POSITION_EARLIEST:
            spec = "earliest"
        elif request.position == consume_pb2.ListOffsetRequest.POSITION_LATEST:
            spec = "latest"
        elif request.position == consume_pb2.ListOffsetRequest.POSITION_UNSPECIFIED:
            spec = request.timestamp_ms
        else:
            raise InvalidConfigError(
                f"list offset position {request.position} is unknown; use earliest, latest "
                "or a timestamp"
            )
        offset = self.broker.list_offset(request.topic, request.partition, spec)
        return consume_pb2.ListOffsetResponse(offset=offset)

    @unary
    def CommitOffsets(
        self, request: consume_pb2.CommitOffsetsRequest, context: grpc.ServicerContext
    ) -> consume_pb2.CommitOffsetsResponse:
        principal = principal_of(self.guard, context)
        offsets = offsets_from_proto(request.offsets)
        self.guard.require(principal, Operation.READ, (request.group_id,), Resource.GROUP)
        self.guard.require(principal, Operation.READ, sorted({tp.topic for tp in offsets}))
        member = member_from_proto(request.member if request.HasField("member") else None)
        self.broker.commit_offsets(request.group_id, offsets, member)
        return consume_pb2.CommitOffsetsResponse()

    @unary
    def FetchOffsets(
        self, request: consume_pb2.FetchOffsetsRequest, context: grpc.ServicerContext
    ) -> consume_pb2.FetchOffsetsResponse:
        principal = principal_of(self.guard, context)
        partitions = topic_partitions_from_proto(request.partitions)
        self.guard.require(principal, Operation.READ, (request.group_id,), Resource.GROUP)
        self.guard.require(principal, Operation.READ, sorted({tp.topic for tp in partitions}))
        offsets = self.broker.fetch_offsets(request.group_id, partitions)
        return consume_pb2.FetchOffsetsResponse(offsets=offsets_to_proto(offsets))

    @unary
    def GroupHeartbeat(
        self, request: consume_pb2.GroupHeartbeatRequest, context: grpc.ServicerContext
    ) -> consume_pb2.GroupHeartbeatResponse:
        # As Kafka's ConsumerGroupHeartbeat: READ on the group. Topics are not checked here:
        # the assignment only names partitions; reading them needs READ on their topics.
        principal = principal_of(self.guard, context)
        self.guard.require(principal, Operation.READ, (request.group_id,), Resource.GROUP)
        answer = self.broker.group_heartbeat(heartbeat_from_proto(request))
        return answer_to_proto(answer)
