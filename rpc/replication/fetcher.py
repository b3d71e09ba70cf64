"""The follower's side: one fetcher thread per leader broker (CLUSTER.md §3.3).

``ReplicaFetchers(broker, address_of)`` runs, for each leader broker id passed to
``ensure``, a daemon thread ``replica-fetcher-<leader_id>`` that loops:

    request = broker.replica_fetch_request(leader_id)      None: wait a little, ask again
    response = leader's Replication.Fetch(request)        deadline max_wait_ms + request_timeout_ms
    broker.apply_replica_fetch(leader_id, response)

A failed round (the leader unreachable, a TwinlogError from it, an exception from the
broker) is logged once per change of what failed, not per attempt, then backed off
(``engine.base.backoff``: ``backoff_ms`` doubling to ``backoff_max_ms``, not jittered)
and the leader's address asked of ``address_of`` again: the leader may have moved. No
lock is held while a thread waits on the network; ``stop`` and ``close`` cancel an
in-flight long poll instead of waiting it out.

A response that arrives after ``stop`` is not applied, but one already being applied
finishes: ``apply_replica_fetch`` must itself ignore partitions this broker no longer
follows from that leader (a role change races with any fetch in flight).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from twinlog.rpc.replication.broker_identity import BrokerTls
from twinlog.rpc.replication.channel import CHANNEL_OPTIONS
from twinlog.rpc.replication.leader_fetcher import LeaderFetcher, Settings
from twinlog.rpc.replication.roles import ReplicaFollower

log = logging.getLogger("twinlog.replication")

REQUEST_TIMEOUT_MS = 10_000  # beyond max_wait_ms: a leader silent this long is retried
BACKOFF_MS = 50
BACKOFF_MAX_MS = 1_000
IDLE_WAIT_MS = 200  # nothing to fetch: ask the broker again after this (or on ensure)
CLOSE_TIMEOUT_S = 5.0


@dataclass
class _Slot:
    current: LeaderFetcher | None = None
    stopped: LeaderFetcher | None = None  # the last one stopped, maybe still finishing


class ReplicaFetchers:
    """Thread rule: every method from any thread."""

    def __init__(
        self,
        broker: ReplicaFollower,
        address_of: Callable[[int], str | None],
        *,
        request_timeout_ms: int = REQUEST_TIMEOUT_MS,
        backoff_ms: int = BACKOFF_MS,
        backoff_max_ms: int = BACKOFF_MAX_MS,
        idle_wait_ms: int = IDLE_WAIT_MS,
        channel_options: tuple[tuple[str, Any], ...] = CHANNEL_OPTIONS,
        tls: BrokerTls | None = None,
    ) -> None:
        self.broker = broker
        self.address_of = address_of
        # Refuses bad settings (leader_fetcher.SETTINGS_RULES) now, not in a thread later.
        self.settings = Settings(
            request_timeout_ms, backoff_ms, backoff_max_ms, idle_wait_ms, channel_options, tls
        )
        self._lock = threading.Lock()  # guards the slots; never held across a wait
        self._slots: dict[int, _Slot] = {}
        self._closed = False

    def ensure(self, leader_id: int) -> None:
        """Fetch from ``leader_id``: start its thread if none runs, else wake it (its set of
        partitions may just have changed). Does nothing once closed."""
        with self._lock:
            if self._closed:
                return
            slot = self._slots.setdefault(leader_id, _Slot())
            if slot.current is not None and slot.current.alive:
                slot.current.wake()
                return
            # A stopped predecessor may still be applying: the new thread waits for it
            # first, so two applies from one leader never overlap. (A current thread
            # that is not alive ended on a bug, already logged: replace it.)
            predecessor, slot.stopped = slot.current or slot.stopped, None
            slot.current = LeaderFetcher(
                leader_id, self.broker, self.address_of, self.settings, predecessor
            )
            slot.current.start()

    def stop(self, leader_id: int, wait_s: float = 0.0) -> bool:
        """Stop fetching from ``leader_id`` (its long poll is cancelled); wait up to
        ``wait_s`` for the thread to end. True when no thread for it runs any more."""
        with self._lock:
            slot = self._slots.get(leader_id)
            fetcher = slot.current if slot is not None else None
            if slot is not None and fetcher is not None:
                slot.current, slot.stopped = None, fetcher
                fetcher.stop()
            waiting = slot.stopped if slot is not None else None
        if waiting is None:
            return True
        waiting.join(wait_s)
        return not waiting.alive

    def leaders(self) -> set[int]:
        """The leader ids ensure()d and not stopped since."""
        with self._lock:
            return {leader for leader, slot in self._slots.items() if slot.current is not None}

    def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> bool:
        """Stop every thread and wait up to ``timeout_s`` in all; True when all ended.

        A thread still running after that (stuck inside the broker) is a daemon: it
        does not hold the process up, and it is named in a warning."""
        with self._lock:
            self._closed = True
            fetchers = [
                fetcher
                for slot in self._slots.values()
                for fetcher in (slot.current, slot.stopped)
                if fetcher is not None
            ]
            self._slots.clear()
        for fetcher in fetchers:
            fetcher.stop()
        deadline = time.monotonic() + timeout_s
        for fetcher in fetchers:
            fetcher.join(max(0.0, deadline - time.monotonic()))
        left = [fetcher.name for fetcher in fetchers if fetcher.alive]
        if left:
            log.warning("replica fetchers still running after %.1f s: %s", timeout_s, left)
        return not left

    def __enter__(self) -> ReplicaFetchers:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
