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

Like ``Replication``, every call passes the ``InternalGuard`` first (``internal_checks``):
a coordinator's calls only from the broker leading its ``__txn_journal`` partition, at no
higher epoch than ZooKeeper records; a registration only from the partition's leader; a
settlement only from the group's coordinator. It is served only by cluster brokers, on the
inter-broker listener when they have certificates (``RpcServer``).
"""

from __future__ import annotations

import logging
from typing import Protocol

import grpc

from twinlog.engine.broker.partition_calls import (
    IssuedProducer,
    LookupProducer,
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
    issued_to_proto,
    lookup_from_proto,
    register_from_proto,
    settle_from_proto,
)
from twinlog.rpc.replication.internal_guard import InternalGuard
from twinlog.rpc.wire.call_errors import answering_errors

log = logging.getLogger("twinlog.coordination")


class CoordinationHost(Protocol):
    """What the service needs of a broker (``engine/broker/broker.py``'s ``Broker``)."""

    @property
    def local_partition_leaders(self) -> PartitionLeaders: ...

    def register_partition_here(self, request: RegisterPartition) -> None: ...

    def settle_offsets_holder_here(self, request: SettleOffsetsHolder) -> None: ...

    def lookup_producer_here(self, request: LookupProducer) -> IssuedProducer: ...


# Stale epochs and moved leaders are routine during a leader change: DEBUG.
answering = answering_errors(log, retriable_level=logging.DEBUG)


class CoordinationService(coordination_pb2_grpc.CoordinationServicer):
    """Thread rule: any number of calls at once (the broker's own rule)."""

    def __init__(self, broker: CoordinationHost, guard: InternalGuard | None = None) -> None:
        self.broker = broker
        self.guard = guard or InternalGuard()

    @answering
    def RegisterPartition(
        self, request: coordination_pb2.RegisterPartitionRequest, context: grpc.ServicerContext
    ) -> coordination_pb2.RegisterPartitionResponse:
        register = register_from_proto(request)
        self.guard.admit(
            context,
            "coordination.register_partition",
            lambda checks, caller: checks.check_register(caller, register),
        )
        self.broker.register_partition_here(register)
        return coordination_pb2.RegisterPartitionResponse()

    @answering
    def CountEntries(
        self, request: coordination_pb2.CountEntriesRequest, context: grpc.ServicerContext
    ) -> coordination_pb2.CountEntriesResponse:
        count = count_from_proto(request)
        self.guard.admit(
            context,
            "coordination.count_entries",
            lambda checks, caller: checks.check_coordinator(
                caller, count.transaction_id, count.epochs
            ),
        )
        answer = self.broker.local_partition_leaders.count_entries(count)
        return entry_count_to_proto(answer)

    @answering
    def ApplyCommit(
        self, request: coordination_pb2.ApplyCommitRequest, context: grpc.ServicerContext
    ) -> coordination_pb2.ApplyCommitResponse:
        commit = commit_from_proto(request)
        self.guard.admit(
            context,
            "coordination.apply_commit",
            lambda checks, caller: checks.check_coordinator(
                caller, commit.transaction_id, commit.epochs
            ),
        )
        self.broker.local_partition_leaders.apply_commit(commit)
        return coordination_pb2.ApplyCommitResponse()

    @answering
    def ApplyAbort(
        self, request: coordination_pb2.ApplyAbortRequest, context: grpc.ServicerContext
    ) -> coordination_pb2.ApplyAbortResponse:
        abort = abort_from_proto(request)
        self.guard.admit(
            context,
            "coordination.apply_abort",
            lambda checks, caller: checks.check_coordinator(
                caller, abort.transaction_id, abort.epochs
            ),
        )
        self.broker.local_partition_leaders.apply_abort(abort)
        return coordination_pb2.ApplyAbortResponse()

    @answering
    def SettleOffsetsHolder(
        self, request: coordination_pb2.SettleOffsetsHolderRequest, context: grpc.ServicerContext
    ) -> coordination_pb2.SettleOffsetsHolderResponse:
        settle = settle_from_proto(request)
        self.guard.admit(
            context,
            "coordination.settle_offsets_holder",
            lambda checks, caller: checks.check_settle(caller, settle),
        )
        self.broker.settle_offsets_holder_here(settle)
        return coordination_pb2.SettleOffsetsHolderResponse()

    @answering
    def LookupProducer(
        self, request: coordination_pb2.LookupProducerRequest, context: grpc.ServicerContext
    ) -> coordination_pb2.LookupProducerResponse:
        lookup = lookup_from_proto(request)
        # any broker may ask (a partition leader checking a batch's producer id): the
        # door admits brokers only; nothing changes
        self.guard.admit(context, "coordination.lookup_producer")
        return issued_to_proto(self.broker.lookup_producer_here(lookup))


def add_coordination_service(
    server: grpc.Server, broker: CoordinationHost, guard: InternalGuard | None = None
) -> CoordinationService:
    """Serve ``twinlog.v1.Coordination`` for ``broker`` on ``server`` (before it starts)."""
    service = CoordinationService(broker, guard)
    coordination_pb2_grpc.add_CoordinationServicer_to_server(service, server)
    return service
