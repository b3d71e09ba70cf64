"""The serving side of ``twinlog.v1.Coordination``: this broker's own partitions and
coordinators, for the coordinators, partition leaders and group coordinators of other
brokers.

Each method decodes its request (``coordination_convert``), makes the call on the
broker's *local* side and encodes the answer:

    RegisterPartition   broker.register_partition_here(request)
    CountEntries        broker.local_partition_leaders.count_entries(request)
    ApplyCommit         broker.local_partition_leaders.apply_commit(request)
    ApplyAbort          broker.local_partition_leaders.apply_abort(request)
    SettleOffsetsHolder broker.settle_offsets_holder_here(request)

Never forwarded: a call for a partition this broker does not lead, or a transaction it
does not coordinate, is refused by the broker (NotLeaderOrFollowerError, a stale epoch,
NotCoordinatorError), and the caller locates again. Every exception leaves as the status
code and trailing metadata of ``rpc/wire/errors.py``, so the caller rebuilds the class.

Like ``Replication``, the service trusts whoever reaches the port (broker-to-broker TLS
and tokens are not here yet): it is served only by cluster brokers (``RpcServer``).
"""

from __future__ import annotations

import logging
from typing import Protocol

import grpc

from twinlog.engine.broker.partition_calls import (
    PartitionLeaders,
    RegisterPartition,
    SettleOffsetsHolder,
)
from twinlog.rpc.generated.twinlog.v1 import coordination_pb2, coordination_pb2_grpc
from twinlog.rpc.replication.coordination_convert import (
    abort_from_proto,
    commit_from_proto,
    count_from_proto,
    entry_count_to_proto,
    register_from_proto,
    settle_from_proto,
)
from twinlog.rpc.wire.call_errors import answering_errors

log = logging.getLogger("twinlog.coordination")


class CoordinationHost(Protocol):
    """What the service needs of a broker (``engine/broker/broker.py``'s ``Broker``)."""

    @property
    def local_partition_leaders(self) -> PartitionLeaders: ...

    def register_partition_here(self, request: RegisterPartition) -> None: ...

    def settle_offsets_holder_here(self, request: SettleOffsetsHolder) -> None: ...


# Stale epochs and moved leaders are routine during a leader change: DEBUG.
answering = answering_errors(log, retriable_level=logging.DEBUG)


class CoordinationService(coordination_pb2_grpc.CoordinationServicer):
    """Thread rule: any number of calls at once (the broker's own rule)."""

    def __init__(self, broker: CoordinationHost) -> None:
        self.broker = broker

    @answering
    def RegisterPartition(
        self, request: coordination_pb2.RegisterPartitionRequest, context: grpc.ServicerContext
    ) -> coordination_pb2.RegisterPartitionResponse:
        self.broker.register_partition_here(register_from_proto(request))
        return coordination_pb2.RegisterPartitionResponse()

    @answering
    def CountEntries(
        self, request: coordination_pb2.CountEntriesRequest, context: grpc.ServicerContext
    ) -> coordination_pb2.CountEntriesResponse:
        answer = self.broker.local_partition_leaders.count_entries(count_from_proto(request))
        return entry_count_to_proto(answer)

    @answering
    def ApplyCommit(
        self, request: coordination_pb2.ApplyCommitRequest, context: grpc.ServicerContext
    ) -> coordination_pb2.ApplyCommitResponse:
        self.broker.local_partition_leaders.apply_commit(commit_from_proto(request))
        return coordination_pb2.ApplyCommitResponse()

    @answering
    def ApplyAbort(
        self, request: coordination_pb2.ApplyAbortRequest, context: grpc.ServicerContext
    ) -> coordination_pb2.ApplyAbortResponse:
        self.broker.local_partition_leaders.apply_abort(abort_from_proto(request))
        return coordination_pb2.ApplyAbortResponse()

    @answering
    def SettleOffsetsHolder(
        self, request: coordination_pb2.SettleOffsetsHolderRequest, context: grpc.ServicerContext
    ) -> coordination_pb2.SettleOffsetsHolderResponse:
        self.broker.settle_offsets_holder_here(settle_from_proto(request))
        return coordination_pb2.SettleOffsetsHolderResponse()


def add_coordination_service(server: grpc.Server, broker: CoordinationHost) -> CoordinationService:
    """Serve ``twinlog.v1.Coordination`` for ``broker`` on ``server`` (before it starts)."""
    service = CoordinationService(broker)
    coordination_pb2_grpc.add_CoordinationServicer_to_server(service, server)
    return service
