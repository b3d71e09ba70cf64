"""The calling side of ``twinlog.v1.Coordination``: the seam's two Protocols over gRPC.

    RemotePartitionLeaders         a coordinator's calls to partition leaders
                                   (``partition_calls.PartitionLeaders``)
    RemoteTransactionCoordinators  a partition leader's and a group coordinator's calls
                                   to a transaction's coordinator
                                   (``partition_calls.TransactionCoordinators``)

``ClusterMember`` sets them as ``Broker.partition_leaders`` and
``Broker.transaction_coordinators`` when a broker joins a cluster (its local side is the
broker's own ``HereCoordinators``, ``engine.broker.seam_adapters``). Each call:

1. locates its target (``coordination_locator``): the live leader of the partition
   (``__consumer_offsets`` partitions included: a group coordinator leads its own), or
   of ``__txn_journal-N`` for coordinator N (a transaction's N is in its id's low bits:
   the transaction registering a partition, or the holder of a group's offsets);
2. when that is this broker, makes the call in-process on the local side given to the
   constructor; else sends it to that broker, within the call's deadline (``timeout_s``,
   10 s by default: no call waits longer on the network);
3. raises what the target raised, rebuilt through ``rpc/wire/errors.py``: the same class
   an in-process call raises. A transport failure is BrokerUnavailableError (refused,
   reset) or RequestTimedOutError (the deadline), both retriable.

A stale location (NotLeaderOrFollowerError, BrokerUnavailableError; NotCoordinatorError
for a coordinator, and UnknownTransactionError or UnknownProducerIdError, which a deposed
coordinator answers for what its successor began until it learns it was moved) costs one
refresh of the locator and, if the target moved (another
broker, or the same broker at another address), one more attempt within the same
deadline; nothing more. Longer waits belong to the callers: the coordinator's completion
worker retries APPLY with backoff, a producer retries a refused send. A leader epoch
found stale (FencedLeaderEpochError) refreshes the locator too, so that the caller's next
call carries the current epoch; the call is not resent with an epoch the caller did not
choose.

Broker-to-broker channels are those of the replica fetchers (``channel.open_channel``:
plaintext, the same limits and keepalive), one per broker, opened on first use and
closed by ``close``.

Thread rule: any thread; no lock is held across a call.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

import grpc

from twinlog.engine.base.errors import (
    BrokerUnavailableError,
    FencedLeaderEpochError,
    NotCoordinatorError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
    UnknownProducerIdError,
    UnknownTransactionError,
)
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.internal_topics import TXN_JOURNAL_TOPIC
from twinlog.engine.transactions.partition_calls import (
    ApplyAbort,
    ApplyCommit,
    CountEntries,
    EntryCount,
    IssuedProducer,
    LookupProducer,
    PartitionLeaders,
    RegisterPartition,
    SettleOffsetsHolder,
    TransactionCoordinators,
    apply_commits,
    coordinator_partition_of,
)
from twinlog.rpc.generated.twinlog.v1 import coordination_pb2_grpc
from twinlog.rpc.replication.broker_identity import BrokerTls
from twinlog.rpc.replication.channel import CHANNEL_OPTIONS, open_channel
from twinlog.rpc.replication.coordination_convert import (
    abort_to_proto,
    commit_outcomes_from_proto,
    commit_to_proto,
    commits_to_proto,
    count_to_proto,
    entry_count_from_proto,
    issued_from_proto,
    lookup_to_proto,
    register_to_proto,
    settle_to_proto,
)
from twinlog.rpc.replication.coordination_locator import LeaderLocator, Location
from twinlog.rpc.wire.errors import error_from_rpc_error

log = logging.getLogger("twinlog.coordination")

# What a coordinator answers for a transaction or producer its successor began, in the
# moment before it learns it was moved (a controlled shutdown, an election): worth one
# refresh of the locator and, if the cluster names another broker, one more send. A true
# "unknown" costs one ZooKeeper read, on an error path.
_DEPOSED_ANSWERS = (UnknownTransactionError, UnknownProducerIdError)

TIMEOUT_S = 10.0  # every call's deadline, the retry after a refresh included
Result = TypeVar("Result")
Local = TypeVar("Local")  # the in-process side of a direction
Stub = Any  # coordination_pb2_grpc.CoordinationStub (generated without type hints)


class BrokerChannels:
    """One channel per broker id, to the address ``address_of`` gives at each call.

    A broker found at another address (it registered again) gets a new channel; the old
    one is closed only once no call can still use it (``retire_after_s``, at least a
    call's deadline), or by ``close``.
    """

    def __init__(
        self,
        address_of: Callable[[int], str | None],
        options: tuple[tuple[str, Any], ...] = CHANNEL_OPTIONS,
        retire_after_s: float = TIMEOUT_S,
        tls: BrokerTls | None = None,
    ) -> None:
        self.address_of = address_of
        self.options = options
        self.tls = tls
        self.retire_after_s = retire_after_s
        self._lock = threading.Lock()
        self._open: dict[int, tuple[str, grpc.Channel, Stub]] = {}
        self._retired: list[tuple[float, grpc.Channel]] = []
        self._closed = False

    def stub(self, broker_id: int) -> tuple[Stub, str]:
        """The stub and the address it reaches; BrokerUnavailableError without one."""
        address = self.address_of(broker_id)
        if address is None:
            raise BrokerUnavailableError(
                f"broker {broker_id} has no registered address (it is down, or has not "
                "joined yet); retry once it is back or another broker leads"
            )
        with self._lock:
            if self._closed:
                raise BrokerUnavailableError(
                    "this broker's coordination calls are closed (it is leaving the cluster)"
                )
            self._close_retired(time.monotonic())
            current = self._open.get(broker_id)
            if current is not None and current[0] == address:
                return current[2], address
            if current is not None:
                self._retired.append((time.monotonic(), current[1]))
            channel = open_channel(address, self.options, self.tls, broker_id)
            stub = coordination_pb2_grpc.CoordinationStub(channel)
            self._open[broker_id] = (address, channel, stub)
            return stub, address

    def moved(self, broker_id: int) -> bool:
        """Whether ``broker_id`` has an address now that its channel does not reach (it
        registered again elsewhere, or had none at the last call)."""
        now = self.address_of(broker_id)
        with self._lock:
            current = self._open.get(broker_id)
        return now is not None and (current is None or current[0] != now)

    def _close_retired(self, now: float) -> None:
        keep = []
        for retired_at, channel in self._retired:
            if now - retired_at >= self.retire_after_s:
                channel.close()
            else:
                keep.append((retired_at, channel))
        self._retired = keep

    def close(self) -> None:
        with self._lock:
            self._closed = True
            channels = [channel for _, channel, _ in self._open.values()]
            channels += [channel for _, channel in self._retired]
            self._open.clear()
            self._retired.clear()
        for channel in channels:
            channel.close()


class _Transport(Generic[Local]):
    """What both directions share: this broker's id, the channels, the deadline."""

    def __init__(
        self,
        broker_id: int,
        local: Local,
        locator: LeaderLocator,
        address_of: Callable[[int], str | None],
        *,
        timeout_s: float = TIMEOUT_S,
        channel_options: tuple[tuple[str, Any], ...] = CHANNEL_OPTIONS,
        tls: BrokerTls | None = None,
    ) -> None:
        """``local``: what calls answered by this broker go to, in-process; ``tls``: this
        broker's certificate, when brokers authenticate each other."""
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        self.broker_id = broker_id
        self.local = local
        self.locator = locator
        self.timeout_s = timeout_s
        self.channels = BrokerChannels(
            address_of, channel_options, retire_after_s=timeout_s, tls=tls
        )

    def _send(
        self,
        target: int,
        method: Callable[[Stub], Callable[..., Any]],
        message: Any,
        deadline: float,
        what: str,
    ) -> Any:
        """Send ``message`` to broker ``target``; its answer, or the error it raised."""
        stub, address = self.channels.stub(target)
        remaining_s = deadline - time.monotonic()
        if remaining_s <= 0:
            raise RequestTimedOutError(
                f"{what}: the {self.timeout_s:g} s deadline passed before broker {target} "
                f"at {address} was asked; it is retried later"
            )
        try:
            return method(stub)(message, timeout=remaining_s)
        except grpc.RpcError as error:
            raised = error_from_rpc_error(error)
        raised.args = (f"{raised.args[0]} [{what} at broker {target}, {address}]",)
        raise raised

    def close(self) -> None:
        """Close the channels; later calls to other brokers fail (BrokerUnavailableError,
        retriable), calls answered here still work."""
        self.channels.close()


class RemotePartitionLeaders(_Transport[PartitionLeaders]):
    """``PartitionLeaders`` across a cluster: each call to the partition's live leader."""

    def leader_epoch(self, topic_partition: TopicPartition) -> int:
        """The leader epoch the cluster's metadata gives (0 if unknown), or this broker's
        own replica's if that is newer (epochs only grow: the metadata read is stale)."""
        here = self.local.leader_epoch(topic_partition)
        location = self.locator.partition_leader(topic_partition)
        if location is None or location.leader_epoch < here:
            location = self.locator.partition_leader(topic_partition, refresh=True)
        located = 0 if location is None or location.gone else location.leader_epoch
        return max(here, located)

    def leads_here(self, topic_partition: TopicPartition) -> bool:
        """Does the cached metadata say this broker leads the partition (``LocalLeaders``;
        no read of ZooKeeper: a hint)."""
        location = self.locator.partition_leader(topic_partition, refresh=False)
        return location is not None and not location.gone and location.broker_id == self.broker_id

    def count_entries(self, request: CountEntries) -> EntryCount:
        answer: EntryCount = self._route(
            request.topic_partition,
            lambda: self.local.count_entries(request),
            lambda stub: stub.CountEntries,
            count_to_proto(request),
            entry_count_from_proto,
            f"CountEntries of transaction {request.transaction_id} on {request.topic_partition}",
        )
        return answer

    def apply_commit(self, request: ApplyCommit) -> None:
        self._route(
            request.topic_partition,
            lambda: self.local.apply_commit(request),
            lambda stub: stub.ApplyCommit,
            commit_to_proto(request),
            lambda _answer: None,
            f"ApplyCommit of transaction {request.transaction_id} on {request.topic_partition}",
        )

    def apply_commits(self, requests: Sequence[ApplyCommit]) -> list[BaseException | None]:
        """A copy group (``CopyGroupLeaders``): in-process where this broker leads the
        partition, else one ApplyCommits call to its leader; each request's error, or None.
        A failure of the call itself is every request's."""
        topic_partition = requests[0].topic_partition
        try:
            outcomes: list[BaseException | None] = self._route(
                topic_partition,
                lambda: apply_commits(self.local, requests),
                lambda stub: stub.ApplyCommits,
                commits_to_proto(requests),
                commit_outcomes_from_proto,
                f"ApplyCommits of transactions {[r.transaction_id for r in requests]} on "
                f"{topic_partition}",
            )
        except Exception as error:
            return [error] * len(requests)
        if len(outcomes) != len(requests):
            mismatch = BrokerUnavailableError(
                f"ApplyCommits on {topic_partition}: {len(outcomes)} outcomes for "
                f"{len(requests)} requests; tried again later"
            )
            return [mismatch] * len(requests)
        return outcomes

    def apply_abort(self, request: ApplyAbort) -> None:
        self._route(
            request.topic_partition,
            lambda: self.local.apply_abort(request),
            lambda stub: stub.ApplyAbort,
            abort_to_proto(request),
            lambda _answer: None,
            f"ApplyAbort of transaction {request.transaction_id} on {request.topic_partition}",
        )

    def _route(
        self,
        topic_partition: TopicPartition,
        here: Callable[[], Result],
        method: Callable[[Stub], Callable[..., Any]],
        message: Any,
        decode: Callable[[Any], Result],
        what: str,
    ) -> Result:
        deadline = time.monotonic() + self.timeout_s
        try:
            location = self._locate(topic_partition, refresh=False)
            try:
                return self._at(location, here, method, message, decode, deadline, what)
            except (NotLeaderOrFollowerError, BrokerUnavailableError):
                moved = self._locate(topic_partition, refresh=True)
                if moved == location and (
                    location.gone
                    or location.broker_id == self.broker_id
                    or not self.channels.moved(location.broker_id)
                ):
                    raise  # nothing moved: the caller retries later
                log.debug("%s: retrying at %s (was %s)", what, moved, location)
            return self._at(moved, here, method, message, decode, deadline, what)
        except FencedLeaderEpochError:
            # The caller's epoch is older than the leader's: read the metadata again, so
            # that the caller's next call carries the current one.
            self.locator.partition_leader(topic_partition, refresh=True)
            raise

    def _at(
        self,
        location: Location,
        here: Callable[[], Result],
        method: Callable[[Stub], Callable[..., Any]],
        message: Any,
        decode: Callable[[Any], Result],
        deadline: float,
        what: str,
    ) -> Result:
        if location.gone or location.broker_id == self.broker_id:
            # This broker leads it, or no broker holds it: the local side answers (a
            # partition it does not hold as a deleted one: PARTITION_GONE, or skipped).
            return here()
        return decode(self._send(location.broker_id, method, message, deadline, what))

    def _locate(self, topic_partition: TopicPartition, refresh: bool) -> Location:
        """The live leader, or GONE as a fresh read says; NotLeaderOrFollowerError when
        none is known. A cached GONE or unknown is read again first."""
        location = self.locator.partition_leader(topic_partition, refresh=refresh)
        if not refresh and (location is None or location.gone):
            location = self.locator.partition_leader(topic_partition, refresh=True)
        if location is None:
            raise NotLeaderOrFollowerError(
                f"{topic_partition}: no live leader is known (offline, its leader not "
                "registered or not chosen yet, or ZooKeeper could not be read); nothing "
                "was sent, retry once the cluster has elected one"
            )
        return location


class RemoteTransactionCoordinators(_Transport[TransactionCoordinators]):
    """``TransactionCoordinators`` across a cluster: each call to the coordinator of its
    transaction, the live leader of ``__txn_journal-N``."""

    def register_partition(self, request: RegisterPartition) -> None:
        coordinator_partition = coordinator_partition_of(request.transaction_id)
        self._route(
            coordinator_partition,
            lambda: self.local.register_partition(request),
            lambda stub: stub.RegisterPartition,
            register_to_proto(request),
            f"RegisterPartition of transaction {request.transaction_id} on "
            f"{request.topic_partition} with coordinator {coordinator_partition}",
        )

    def settle_offsets_holder(self, request: SettleOffsetsHolder) -> None:
        coordinator_partition = coordinator_partition_of(request.holder_id)
        self._route(
            coordinator_partition,
            lambda: self.local.settle_offsets_holder(request),
            lambda stub: stub.SettleOffsetsHolder,
            settle_to_proto(request),
            f"SettleOffsetsHolder of transaction {request.holder_id} (group "
            f"{request.group_id!r}, {request.topic_partition}) for transaction "
            f"{request.newcomer_id} with coordinator {coordinator_partition}",
        )

    def lookup_producer(self, request: LookupProducer) -> IssuedProducer:
        coordinator_partition = coordinator_partition_of(request.producer_id)
        answer = self._route(
            coordinator_partition,
            lambda: self.local.lookup_producer(request),
            lambda stub: stub.LookupProducer,
            lookup_to_proto(request),
            f"LookupProducer of producer {request.producer_id} with coordinator "
            f"{coordinator_partition}",
        )
        if isinstance(answer, IssuedProducer):  # answered in-process
            return answer
        return issued_from_proto(answer)

    def _route(
        self,
        coordinator_partition: int,
        here: Callable[[], Any],
        method: Callable[[Stub], Callable[..., Any]],
        message: Any,
        what: str,
    ) -> Any:
        """The answer of coordinator ``coordinator_partition`` (in-process when here)."""
        deadline = time.monotonic() + self.timeout_s
        target = self._locate(coordinator_partition, refresh=False)
        try:
            return self._at(target, here, method, message, deadline, what)
        except (NotCoordinatorError, BrokerUnavailableError, *_DEPOSED_ANSWERS):
            moved = self._locate(coordinator_partition, refresh=True)
            if moved == target and (target == self.broker_id or not self.channels.moved(target)):
                raise  # nothing moved: the caller retries later
            log.debug("%s: retrying at broker %d (was %d)", what, moved, target)
        return self._at(moved, here, method, message, deadline, what)

    def _at(
        self,
        target: int,
        here: Callable[[], Any],
        method: Callable[[Stub], Callable[..., Any]],
        message: Any,
        deadline: float,
        what: str,
    ) -> Any:
        if target == self.broker_id:
            return here()
        return self._send(target, method, message, deadline, what)

    def _locate(self, coordinator_partition: int, refresh: bool) -> int:
        found = self.locator.coordinator(coordinator_partition, refresh=refresh)
        if found is None and not refresh:
            found = self.locator.coordinator(coordinator_partition, refresh=True)
        if found is None:
            raise NotCoordinatorError(
                f"coordinator {coordinator_partition} has no live broker: "
                f"{TXN_JOURNAL_TOPIC}-{coordinator_partition} has no live leader known (or "
                "ZooKeeper could not be read); nothing was sent, retry once one is elected"
            )
        return found
