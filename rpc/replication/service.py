"""The leader's side of ``twinlog.v1.Replication``: Fetch over ``broker.replica_fetch``.

A partition the broker refuses answers in its own ``FetchedPartition.error`` (the
broker decides that); an exception of the whole call leaves as the status code and
trailing metadata of ``rpc/wire/errors.py``, so the follower rebuilds the same class.

Every fetch passes the ``InternalGuard`` first: on a cluster with broker certificates
only a broker may fetch, and only in its own name and with its registered broker epoch
(``internal_checks``); a refused fetch acknowledges nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import grpc

from twinlog.engine.replication.fetch_calls import FetchedPartition
from twinlog.rpc.generated.twinlog.v1 import replication_pb2, replication_pb2_grpc
from twinlog.rpc.replication.convert import fetch_from_proto, response_to_proto
from twinlog.rpc.replication.internal_guard import InternalGuard
from twinlog.rpc.replication.roles import ReplicaLeader
from twinlog.rpc.wire.call_errors import answering_errors

log = logging.getLogger("twinlog.replication")


def within_bytes(
    fetched: Sequence[FetchedPartition], response_bytes_max: int | None
) -> list[FetchedPartition]:
    """The answer with the records of later partitions left out once their sum would pass
    ``response_bytes_max``: gRPC refuses a larger message (RESOURCE_EXHAUSTED) and the
    follower would retry the same request forever. A partition left out keeps its high
    watermark and log bounds; its records come with the next fetch."""
    if response_bytes_max is None:
        return list(fetched)
    kept: list[FetchedPartition] = []
    total = 0
    for item in fetched:
        total += len(item.records)
        if item.records and kept and total > response_bytes_max:
            total -= len(item.records)
            item = FetchedPartition(
                item.topic_partition,
                high_watermark=item.high_watermark,
                log_start_offset=item.log_start_offset,
                log_end_offset=item.log_end_offset,
            )
        kept.append(item)
    return kept


# Retriable refusals (not leader, closing) are routine during a leader change: DEBUG.
answering = answering_errors(log, retriable_level=logging.DEBUG)


class ReplicationService(replication_pb2_grpc.ReplicationServicer):
    """Thread rule: any number of calls at once (the broker's own rule)."""

    def __init__(
        self,
        broker: ReplicaLeader,
        *,
        response_bytes_max: int | None = None,
        guard: InternalGuard | None = None,
    ) -> None:
        self.broker = broker
        self.response_bytes_max = response_bytes_max
        self.guard = guard or InternalGuard()

    @answering
    def Fetch(
        self, request: replication_pb2.ReplicaFetchRequest, context: grpc.ServicerContext
    ) -> replication_pb2.ReplicaFetchResponse:
        fetch = fetch_from_proto(request)
        self.guard.admit(
            context, "replication.fetch", lambda checks, caller: checks.check_fetch(caller, fetch)
        )
        fetched = self.broker.replica_fetch(fetch)
        return response_to_proto(within_bytes(fetched, self.response_bytes_max))


def add_replication_service(
    server: grpc.Server,
    broker: ReplicaLeader,
    *,
    response_bytes_max: int | None = None,
    guard: InternalGuard | None = None,
) -> ReplicationService:
    """Serve ``twinlog.v1.Replication`` for ``broker`` on ``server`` (before it starts).

    ``response_bytes_max``: the server's ``grpc.max_send_message_length`` less a margin
    for the fields (RpcServer: ``config.fetch_bytes_max``); None sends every answer whole.
    """
    service = ReplicationService(broker, response_bytes_max=response_bytes_max, guard=guard)
    replication_pb2_grpc.add_ReplicationServicer_to_server(service, server)
    return service
