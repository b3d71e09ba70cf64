"""A partition leader's view of its replicas: how far each follower has fetched, who is in
sync, and the high watermark that follows (CLUSTER.md §3.3, §3.9 I1, I4, I5).

    replicas        the partition's assignment (broker ids; the leader among them)
    isr             the in-sync replicas as last written to ZooKeeper: {broker id: broker epoch}
    proposed        an ISR change sent to ZooKeeper and not yet confirmed (KIP-497), or None
    maximal ISR     isr | additions proposed: the high watermark waits for every member
                    (an addition counts at once; a removal only once it is written)
    high watermark  min(log end of every maximal-ISR member), the leader's own included

A partition has one or two replicated logs (``LogKind``: its data log, and its journal
log, co-led: one leader, one ISR, one epoch), each with its own high watermark. A
follower's fetch offset in a log acknowledges everything below it. A follower is caught
up in a log when it has fetched up to the leader's log end as it was at its previous
fetch (Kafka's lastCaughtUpTime), and caught up when it is in every log: one that has not been caught up for ``lag_time_max_ms`` is proposed
for removal; one outside the ISR that reached the high watermark and the start of the
leader's epoch in every log, fetching with the broker epoch it is registered with (KIP-903), is
proposed for addition. Writes below ``min_insync_replicas`` ISR members are refused.

Invariants, asserted on every change: the leader is in the ISR; ISR and proposals are
subsets of the replicas; the high watermark candidate never exceeds the leader's log end.

Thread rule: any thread; one lock.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from twinlog.engine.base.errors import NotLeaderOrFollowerError
from twinlog.engine.replication.fetch_calls import LogKind

UNKNOWN_OFFSET = -1  # a follower that has not fetched since this leader took over


@dataclass
class LogProgress:
    """How far a follower has fetched one log."""

    end_offset: int = UNKNOWN_OFFSET  # its latest fetch offset: it holds everything below
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    leader_end_at_last_fetch: int = 0


@dataclass
class FollowerProgress:
    broker_id: int
    logs: dict[LogKind, LogProgress]
    broker_epoch: int = -1  # from its latest fetch

    @property
    def last_caught_up_ms(self) -> int:
        """Caught up in every log: as late as the log it lags most in."""
        return min(progress.last_caught_up_ms for progress in self.logs.values())

    @property
    def log_end_offset(self) -> int:
        return self.logs[LogKind.DATA].end_offset


@dataclass(frozen=True)
class IsrChange:
    """An ISR to write (``isr``: broker id -> broker epoch), and why."""

    isr: Mapping[int, int]
    added: frozenset[int] = field(default_factory=frozenset)
    removed: frozenset[int] = field(default_factory=frozenset)


class ReplicaSet:
    def __init__(
        self,
        where: str,
        leader_id: int,
        replicas: tuple[int, ...],
        isr: Mapping[int, int],
        *,
        min_insync_replicas: int,
        lag_time_max_ms: int,
        now_ms: int,
        epoch_start_offsets: Mapping[LogKind, int],
    ) -> None:
        """A leader that just took over: every follower's progress is unknown until it
        fetches, and every ISR member counts as caught up now (as Kafka resets them).
        ``epoch_start_offsets``: each replicated log's end when this leader's epoch began
        (the logs tracked are its keys)."""
        self._where = where
        self.leader_id = leader_id
        self.replicas = tuple(replicas)
        self.min_insync_replicas = min_insync_replicas
        self.lag_time_max_ms = lag_time_max_ms
        self.epoch_start_offsets = dict(epoch_start_offsets)
        assert LogKind.DATA in self.epoch_start_offsets, f"{where}: the data log is replicated"
        self._lock = threading.Lock()
        self._isr: dict[int, int] = dict(isr)
        self._proposed: IsrChange | None = None
        self._followers = {
            broker_id: FollowerProgress(
                broker_id,
                {kind: LogProgress(last_caught_up_ms=now_ms) for kind in self.epoch_start_offsets},
            )
            for broker_id in self.replicas
            if broker_id != leader_id
        }
        self._check()

    # --- what the leader asks -------------------------------------------------------

    @property
    def isr(self) -> dict[int, int]:
        with self._lock:
            return dict(self._isr)

    @property
    def proposed(self) -> IsrChange | None:
        return self._proposed

    def enough_in_sync(self) -> bool:
        """May a write be taken? (the ISR as written, as Kafka checks it)"""
        with self._lock:
            return len(self._isr) >= self.min_insync_replicas

    def high_watermark_candidate(
        self, leader_log_end_offset: int, log: LogKind = LogKind.DATA
    ) -> int:
        """min(end of ``log`` on every maximal-ISR member): what every in-sync replica
        holds. A member that has not fetched yet holds it at 0 (the partition's HW never
        moves back: the caller only ever advances)."""
        with self._lock:
            ends = [leader_log_end_offset]
            for broker_id in self._maximal_isr():
                if broker_id != self.leader_id:
                    ends.append(max(self._followers[broker_id].logs[log].end_offset, 0))
            return min(ends)

    def follower_progress(self) -> dict[int, FollowerProgress]:
        with self._lock:
            return {
                key: FollowerProgress(
                    value.broker_id,
                    {kind: LogProgress(**vars(log)) for kind, log in value.logs.items()},
                    value.broker_epoch,
                )
                for key, value in self._followers.items()
            }

    # --- what followers tell it ---------------------------------------------------

    def record_fetch(
        self,
        broker_id: int,
        broker_epoch: int,
        fetch_offset: int,
        leader_log_end_offset: int,
        now_ms: int,
        log: LogKind = LogKind.DATA,
    ) -> bool:
        """A follower fetched ``log`` at ``fetch_offset`` (it holds everything below it).
        True when that moves what this leader knew it to hold: only then can the high
        watermark move for it."""
        with self._lock:
            follower = self._followers.get(broker_id)
            if follower is None:
                raise NotLeaderOrFollowerError(
                    f"{self._where}: broker {broker_id} is not a replica (replicas "
                    f"{list(self.replicas)}); it fetched with stale metadata"
                )
            progress = follower.logs.get(log)
            if progress is None:
                raise NotLeaderOrFollowerError(
                    f"{self._where}: broker {broker_id} fetched its {log.value} log, which "
                    "this partition does not replicate"
                )
            if fetch_offset >= leader_log_end_offset:
                progress.last_caught_up_ms = now_ms
            elif fetch_offset >= progress.leader_end_at_last_fetch:
                progress.last_caught_up_ms = max(progress.last_caught_up_ms, progress.last_fetch_ms)
            follower.broker_epoch = broker_epoch
            moved = progress.end_offset != fetch_offset
            progress.end_offset = fetch_offset
            progress.last_fetch_ms = now_ms
            progress.leader_end_at_last_fetch = leader_log_end_offset
            return moved

    # --- ISR changes (KIP-497) ------------------------------------------------------

    def isr_change_due(
        self,
        now_ms: int,
        high_watermarks: Mapping[LogKind, int],
        registered_epochs: Mapping[int, int],
    ) -> IsrChange | None:
        """The ISR the leader should write now, or None. ``high_watermarks``: each log's.
        ``registered_epochs``: the broker
        epoch each live broker is registered with (a follower fetching with another one
        is a former incarnation and may not join: KIP-380, KIP-903)."""
        with self._lock:
            if self._proposed is not None:
                return None  # one change in flight at a time
            removed = {
                broker_id
                for broker_id in self._isr
                if broker_id != self.leader_id
                and now_ms - self._followers[broker_id].last_caught_up_ms > self.lag_time_max_ms
            }
            added = {
                progress.broker_id
                for progress in self._followers.values()
                if progress.broker_id not in self._isr
                and self._reached(progress, high_watermarks)
                and registered_epochs.get(progress.broker_id) == progress.broker_epoch
            }
            if not removed and not added:
                return None
            isr = {key: value for key, value in self._isr.items() if key not in removed}
            isr.update({broker_id: self._followers[broker_id].broker_epoch for broker_id in added})
            return IsrChange(isr, frozenset(added), frozenset(removed))

    def propose(self, change: IsrChange) -> None:
        """``change`` is being written: its additions count for the high watermark now."""
        with self._lock:
            assert self._proposed is None, f"{self._where}: an ISR change is in flight already"
            self._proposed = change
            self._check()

    def confirm(self, isr: Mapping[int, int]) -> None:
        """ZooKeeper holds ``isr`` now (ours, or the controller's newer one)."""
        with self._lock:
            self._isr = dict(isr)
            self._proposed = None
            self._check()

    def abandon(self) -> None:
        """The proposed write failed: the ISR stays as it was."""
        with self._lock:
            self._proposed = None

    # --- internals ----------------------------------------------------------------

    def _reached(self, follower: FollowerProgress, high_watermarks: Mapping[LogKind, int]) -> bool:
        """Has the follower reached the high watermark and this epoch's start in every log?"""
        return all(
            progress.end_offset >= max(high_watermarks[kind], self.epoch_start_offsets[kind])
            for kind, progress in follower.logs.items()
        )

    def _maximal_isr(self) -> set[int]:
        members = set(self._isr)
        if self._proposed is not None:
            members |= self._proposed.added
        return members

    def _check(self) -> None:
        assert self.leader_id in self._isr, f"{self._where}: the leader left its own ISR"
        assert set(self._isr) <= set(self.replicas), (self._where, self._isr, self.replicas)
        if self._proposed is not None:
            assert set(self._proposed.isr) <= set(self.replicas), (self._where, self._proposed)
