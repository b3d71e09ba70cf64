"""One follower thread fetching from one leader broker (``ReplicaFetchers`` runs them).

Failures are reported once per change of (stage, error class, address): a leader that
is down for a minute is one WARNING, and one INFO when fetching works again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from twinlog.engine.base.backoff import Backoff
from twinlog.engine.base.config_rules import POSITIVE, ConfigRules
from twinlog.engine.base.errors import (
    BrokerUnavailableError,
    NotLeaderOrFollowerError,
    TwinlogError,
    UnknownLeaderEpochError,
)
from twinlog.engine.replication.fetch_calls import FetchedPartition, ReplicaFetch
from twinlog.rpc.generated.twinlog.v1 import replication_pb2, replication_pb2_grpc
from twinlog.rpc.replication.broker_identity import BrokerTls
from twinlog.rpc.replication.channel import open_channel
from twinlog.rpc.replication.convert import fetch_to_proto, response_from_proto
from twinlog.rpc.replication.roles import ReplicaFollower
from twinlog.rpc.wire.errors import NAME_KEY, error_from_rpc_error, rebuild

log = logging.getLogger("twinlog.replication")

# Refusals from a live leader whose role changes are on their way: retried at the first
# backoff step, never the doubled one (the new leader's promotion barrier waits for them).
ROLE_IN_TRANSIT = (NotLeaderOrFollowerError, UnknownLeaderEpochError)


@dataclass(frozen=True)
class Settings:
    request_timeout_ms: int
    backoff_ms: int
    backoff_max_ms: int
    idle_wait_ms: int
    channel_options: tuple[tuple[str, Any], ...]
    tls: BrokerTls | None = None  # this broker's certificate, when brokers authenticate

    def __post_init__(self) -> None:
        SETTINGS_RULES.check(self)
        if self.backoff_max_ms < self.backoff_ms:
            raise SETTINGS_RULES.refuse(
                "backoff_max_ms", self.backoff_max_ms, f"at least backoff_ms ({self.backoff_ms})"
            )

    @property
    def backoff(self) -> Backoff:
        """The pause after failed rounds in a row: backoff_ms doubling to backoff_max_ms.

        Not jittered: one fetcher per leader, so followers of a restarted leader retrying
        in step cost a handful of calls, not a storm."""
        return Backoff(self.backoff_ms, self.backoff_max_ms, jitter=0)


SETTINGS_RULES = ConfigRules(
    "replica fetcher setting",
    {
        "request_timeout_ms": POSITIVE,
        "backoff_ms": POSITIVE,
        "backoff_max_ms": POSITIVE,  # and at least backoff_ms
        "idle_wait_ms": POSITIVE,
    },
    free=("channel_options", "tls"),  # gRPC's options and the broker's certificate, as given
)


def _from_twinlog(error: grpc.RpcError) -> bool:
    """Did a twinlog server answer (its error named in the metadata), or gRPC itself?"""
    metadata: Any = getattr(error, "trailing_metadata", lambda: None)() or ()
    return any(key == NAME_KEY for key, _ in metadata)


def _all_refused(fetched: Sequence[FetchedPartition]) -> TwinlogError | None:
    """The first partition's error when the leader refused every partition: fetching
    again at once would only hear the same, so the round counts as failed and backs off."""
    if not fetched or not all(item.error for item in fetched):
        return None
    first = fetched[0]
    return rebuild(first.error, first.message, None, "")


class _Stopped(Exception):
    """The fetcher was stopped before or while it called the leader."""


class LeaderFetcher:
    """Thread rule: ``start``/``stop``/``wake``/``join`` from any thread; the rest runs on
    its own thread."""

    def __init__(
        self,
        leader_id: int,
        broker: ReplicaFollower,
        address_of: Callable[[int], str | None],
        settings: Settings,
        predecessor: LeaderFetcher | None = None,
    ) -> None:
        self.leader_id = leader_id
        self.broker = broker
        self.address_of = address_of
        self.settings = settings
        self.name = f"replica-fetcher-{leader_id}"
        self._predecessor = predecessor
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._stopping = threading.Event()
        self._wake = threading.Event()
        self._call_lock = threading.Lock()  # guards _calling only; never held across a wait
        # The channel of the fetch in flight: stop() closes it, which ends the call at once.
        self._calling: grpc.Channel | None = None
        self._failures = 0  # failed rounds in a row: the backoff's retry count
        self._address: str | None = None
        self._channel: grpc.Channel | None = None
        self._stub: replication_pb2_grpc.ReplicationStub | None = None
        self._resolve = True
        self._problem: tuple[str, str, str | None] | None = None

    # -- control, from any thread

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()
        with self._call_lock:
            channel = self._calling
        if channel is not None:
            channel.close()  # a long poll in flight ends now (cancelled), not at its deadline

    def join(self, timeout_s: float) -> None:
        if self._thread.ident is not None:
            self._thread.join(timeout_s)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    # -- the thread

    def _run(self) -> None:
        try:
            if self._predecessor is not None:
                self._predecessor._thread.join()
                self._predecessor = None
            while not self._stopping.is_set():
                self._round()
        except Exception:
            # _round catches what the broker and the network raise; this is a bug here.
            log.exception("%s for leader %d ended unexpectedly", self.name, self.leader_id)
        finally:
            self._close_channel()

    def _round(self) -> None:
        self._wake.clear()  # before asking: a wake during the question is not lost
        try:
            request = self.broker.replica_fetch_request(self.leader_id)
        except Exception as error:
            self._failed("planning a fetch", error)
            return
        if request is None:
            self._wake.wait(self.settings.idle_wait_ms / 1000)
            return
        stub = self._stub_for_leader()
        if stub is None:
            self._failed(
                "resolving", BrokerUnavailableError(f"no address known for broker {self.leader_id}")
            )
            return
        try:
            response = self._call_leader(stub, request)
        except _Stopped:
            return
        except grpc.RpcError as error:
            if self._stopping.is_set():
                return
            transport = not _from_twinlog(error)
            if transport:
                self._close_channel()  # reconnect from scratch, to wherever it is now
            self._failed("fetching", error_from_rpc_error(error), transport=transport)
            return
        if self._stopping.is_set():
            return  # stopped while the answer travelled: the broker no longer wants it
        fetched = response_from_proto(response)
        try:
            self.broker.apply_replica_fetch(self.leader_id, fetched)
        except Exception as error:
            self._failed("applying a fetch", error)
            return
        refused = _all_refused(fetched)
        if refused is not None:
            self._failed("fetching", refused)
            return
        self._succeeded()

    def _call_leader(
        self, stub: replication_pb2_grpc.ReplicationStub, request: ReplicaFetch
    ) -> replication_pb2.ReplicaFetchResponse:
        """The blocking call, not ``.future()``: gRPC starts a thread for a future on a
        channel with no other call in flight (its "channel spin" thread, which ends with
        the call), so a fetcher's every round started and ended one (a tenth of a
        follower's fetch samples). ``stop`` ends the call by closing its channel."""
        timeout_s = (request.max_wait_ms + self.settings.request_timeout_ms) / 1000
        with self._call_lock:
            self._calling = self._channel
        try:
            if self._stopping.is_set():  # stop() may have looked before _calling was set
                raise _Stopped
            result: replication_pb2.ReplicaFetchResponse = stub.Fetch(
                fetch_to_proto(request), timeout=timeout_s
            )
            return result
        except ValueError as error:  # "Cannot invoke RPC on closed channel!"
            if self._stopping.is_set():
                raise _Stopped from error
            raise
        finally:
            with self._call_lock:
                self._calling = None

    def _stub_for_leader(self) -> replication_pb2_grpc.ReplicationStub | None:
        if self._resolve or self._stub is None:
            try:
                address = self.address_of(self.leader_id)
            except Exception:
                log.exception("address_of(%d) failed", self.leader_id)
                address = None
            if address != self._address or address is None:
                self._close_channel()
                self._address = address
            self._resolve = False
        if self._address is None:
            self._resolve = True
            return None
        if self._stub is None:
            self._channel = open_channel(
                self._address, self.settings.channel_options, self.settings.tls, self.leader_id
            )
            self._stub = replication_pb2_grpc.ReplicationStub(self._channel)
        return self._stub

    def _close_channel(self) -> None:
        channel, self._channel, self._stub = self._channel, None, None
        if channel is not None:
            channel.close()

    def _failed(self, stage: str, error: BaseException, *, transport: bool = False) -> None:
        """Log (once per change), ask for the address again, back off.

        ``transport``: gRPC itself failed the call (refused, reset, cancelled by a
        stopping server, deadline): one outage is one problem whatever status it shows,
        and a routine one (WARNING), as a retriable TwinlogError is."""
        problem = (stage, "unreachable" if transport else type(error).__name__, self._address)
        if problem != self._problem:
            self._problem = problem
            routine = transport or (isinstance(error, TwinlogError) and error.retriable)
            log.log(
                logging.WARNING if routine else logging.ERROR,
                "%s: %s from leader %d at %s failed: %s: %s; retrying with backoff "
                "(logged again only when this changes)",
                self.name,
                stage,
                self.leader_id,
                self._address,
                type(error).__name__,
                error,
                exc_info=None if isinstance(error, TwinlogError) else error,
            )
        self._resolve = True  # the leader may have moved: ask address_of again
        if isinstance(error, ROLE_IN_TRANSIT):
            # A live broker whose role is on its way (a new leader that has not taken it
            # yet, during a controlled shutdown): its barrier waits for this fetch, so ask
            # again soon instead of backing off towards a second.
            self._stopping.wait(self.settings.backoff.delay_s(1))
            return
        self._failures += 1
        self._stopping.wait(self.settings.backoff.delay_s(self._failures))

    def _succeeded(self) -> None:
        if self._problem is not None:
            log.info(
                "%s: fetching from leader %d at %s again", self.name, self.leader_id, self._address
            )
            self._problem = None
        self._failures = 0
