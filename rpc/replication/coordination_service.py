"""The serving side of ``twinlog.v1.Coordination``: this broker's own partitions and
coordinators, for the coordinators, partition leaders and group coordinators of other
brokers.

Each method decodes its request (``coordination_convert``), makes the call on the
broker's *local* side and encodes the answer:

    RegisterPartition   broker.register_partition_here(request)
    CountEntries        broker.local_partition_leaders.count_entries(request)
    ApplyCommit         broker.local_partition_leaders.apply_commit(request)
    ApplyCommits        partition_calls.apply_commits(broker.local_partition_leaders, ...)
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

import functools
import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import grpc

from twinlog.engine.base.errors import InvalidPartitionsError, NotEnoughResourcesError
from twinlog.engine.transactions.partition_calls import (
    IssuedProducer,
    LookupProducer,
    PartitionLeaders,
    RegisterPartition,
    SettleOffsetsHolder,
    apply_commits,
)
from twinlog.rpc.generated.twinlog.v1 import coordination_pb2, coordination_pb2_grpc
from twinlog.rpc.replication.coordination_convert import (
    abort_from_proto,
    commit_from_proto,
    commit_outcomes_to_proto,
    commits_from_proto,
    count_from_proto,
    entry_count_to_proto,
    issued_to_proto,
    lookup_from_proto,
    register_from_proto,
    settle_from_proto,
)
from twinlog.rpc.replication.internal_checks import InternalCallChecks
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

# A call waits this long for a slot before it is refused (retriable): its caller retries.
SLOT_WAIT_S = 1.0
Method = TypeVar("Method", bound=Callable[..., Any])


def in_a_slot(method: Method) -> Method:
    """Run the call in one of the service's slots. An ApplyCommit waits for its copy to be
    replicated and a RegisterPartition for its journal append: both wait for follower
    fetches, which the same server's threads serve. The slots are fewer than its threads,
    so that fetches always find one (else 16 waiting calls would starve the fetches they
    wait for, until the acknowledgement timeout)."""

    @functools.wraps(method)
    def bounded(self: CoordinationService, request: Any, context: grpc.ServicerContext) -> Any:
        slots = self.slots
        if slots is None:
            return method(self, request, context)
        if not slots.acquire(timeout=SLOT_WAIT_S):
            raise NotEnoughResourcesError(
                f"this broker runs {self.slots_max} coordination calls already (the rest of "
                "its inter-broker threads are kept for replica fetches); retry shortly"
            )
        try:
            return method(self, request, context)
        finally:
            slots.release()

    return bounded  # type: ignore[return-value]


class CoordinationService(coordination_pb2_grpc.CoordinationServicer):
    """Thread rule: any number of calls at once (the broker's own rule)."""

    def __init__(
        self,
        broker: CoordinationHost,
        guard: InternalGuard | None = None,
        slots_max: int | None = None,
    ) -> None:
        """``slots_max``: how many calls run at once (None: no bound)."""
        self.broker = broker
        self.guard = guard or InternalGuard()
        self.slots_max = slots_max
        self.slots = None if slots_max is None else threading.BoundedSemaphore(slots_max)

    @answering
    @in_a_slot
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
    @in_a_slot
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
    @in_a_slot
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
    @in_a_slot
    def ApplyCommits(
        self, request: coordination_pb2.ApplyCommitsRequest, context: grpc.ServicerContext
    ) -> coordination_pb2.ApplyCommitsResponse:
        commits = commits_from_proto(request)
        partitions = {commit.topic_partition for commit in commits}
        if len(partitions) > 1:
            raise InvalidPartitionsError(
                f"ApplyCommits copies one partition's group; this one names {len(partitions)} "
                "partitions (send one call per partition)"
            )

        def check(checks: InternalCallChecks, caller: int | None) -> None:
            for commit in commits:
                checks.check_coordinator(caller, commit.transaction_id, commit.epochs)

        self.guard.admit(context, "coordination.apply_commits", check)
        errors = apply_commits(self.broker.local_partition_leaders, commits)
        return commit_outcomes_to_proto(errors)

    @answering
    @in_a_slot
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
    @in_a_slot
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
    @in_a_slot
    def LookupProducer(
        self, request: coordination_pb2.LookupProducerRequest, context: grpc.ServicerContext
    ) -> coordination_pb2.LookupProducerResponse:
        lookup = lookup_from_proto(request)
        # any broker may ask (a partition leader checking a batch's producer id): the
        # door admits brokers only; nothing changes
        self.guard.admit(context, "coordination.lookup_producer")
        return issued_to_proto(self.broker.lookup_producer_here(lookup))


def coordination_slots(worker_threads: int) -> int:
    """Of a server's ``worker_threads``, how many may run coordination calls: a quarter (at
    least 8) is kept for replica fetches, one long poll per follower broker."""
    return max(1, worker_threads - max(8, worker_threads // 4))


def add_coordination_service(
    server: grpc.Server,
    broker: CoordinationHost,
    guard: InternalGuard | None = None,
    slots_max: int | None = None,
) -> CoordinationService:
    """Serve ``twinlog.v1.Coordination`` for ``broker`` on ``server`` (before it starts);
    ``slots_max``: at most that many of its calls at once (``coordination_slots``)."""
    service = CoordinationService(broker, guard, slots_max)
    coordination_pb2_grpc.add_CoordinationServicer_to_server(service, server)
    return service
