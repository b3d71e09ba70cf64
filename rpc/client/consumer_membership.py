"""A subscribed consumer's membership of its group: the heartbeat thread, and the changes
the consumer's own thread applies in ``poll`` (KIP-848's protocol, as the engine's
``engine/groups`` serves it).

The heartbeat thread joins (member epoch 0), then heartbeats at the interval the coordinator
answers with, each time saying what the consumer owns. An answer is what the consumer may
own now: ``pending_changes`` tells the consumer's thread what to revoke (commit, then
on-revoked) and what it was given (on-assigned); ``acknowledge`` records what it owns
after that, and wakes the heartbeat thread so the coordinator hears of a revocation at
once (the partition's next owner waits for it).

Loss: an answer of UnknownMemberIdError or FencedMemberEpochError, no successful heartbeat
within the session timeout, or no poll within ``max_poll_interval_ms`` (the member leaves,
as Kafka's does): everything owned is lost (on-lost; nothing is committed: another member
may own it now, and a commit made meanwhile carries epoch 0, which the coordinator
refuses), and the member joins again, with the same member id, once the consumer's thread
has taken the loss (its next poll), as Kafka's rejoins inside poll. A
FencedInstanceIdError (another process took this static member's place) is fatal: the
next poll raises it.

A pattern subscription is resolved here against the topics the cluster lists, at the join
and every ``metadata_max_age_ms``; the coordinator is told the topics that matched.

Thread rule: the heartbeat thread runs ``_run``; the consumer's thread calls everything
else. ``_lock`` guards the fields both touch.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from twinlog.engine.base.errors import (
    FencedInstanceIdError,
    FencedMemberEpochError,
    TwinlogError,
    UnknownMemberIdError,
)
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.groups.group_calls import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    GroupHeartbeat,
    GroupHeartbeatAnswer,
    GroupMemberRef,
)
from twinlog.rpc.client.call_deadline import deadline_at
from twinlog.rpc.client.retry import RetryPolicy

log = logging.getLogger("twinlog.client")

NO_PARTITIONS: frozenset[TopicPartition] = frozenset()


@dataclass(frozen=True)
class Subscription:
    """Topic names, or a pattern matched against whole topic names (``re.fullmatch``)."""

    topics: tuple[str, ...] = ()
    pattern: re.Pattern[str] | None = None


@dataclass(frozen=True)
class MembershipChanges:
    """What the consumer's thread does next, in this order: forget ``lost`` (on-lost),
    revoke ``revoked`` (commit, on-revoked), take ``assigned`` (on-assigned). ``round``
    goes back to ``acknowledge``.

    ``member``: who the consumer commits as until the next changes, read at the same
    instant: its records, positions and commits stay in the generation they were read in.
    Were ``group_metadata()`` read later instead, a member that lost its partitions and was
    given them again meanwhile would commit stale positions in the new generation.
    """

    lost: frozenset[TopicPartition]
    revoked: frozenset[TopicPartition]
    assigned: frozenset[TopicPartition]
    round: int
    member: GroupMemberRef

    def __bool__(self) -> bool:
        return bool(self.lost or self.revoked or self.assigned)


class ConsumerMembership:
    def __init__(
        self,
        heartbeat: Callable[[GroupHeartbeat], GroupHeartbeatAnswer],
        list_topics: Callable[[], list[str]],
        group_id: str,
        subscription: Subscription,
        *,
        instance_id: str | None,
        client_id: str,
        session_timeout_ms: int,
        max_poll_interval_ms: int,
        metadata_max_age_ms: int,
        request_timeout_ms: int,
        retry: RetryPolicy,
    ) -> None:
        self.group_id = group_id
        self.instance_id = instance_id
        self._heartbeat = heartbeat
        self._list_topics = list_topics
        self._subscription = subscription
        self._client_id = client_id
        self._session_timeout_ms = session_timeout_ms
        self._max_poll_interval_ms = max_poll_interval_ms
        self._metadata_max_age_ms = metadata_max_age_ms
        self._request_timeout_ms = request_timeout_ms
        self._retry = retry
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self.changed = threading.Event()  # set when pending_changes has something new
        # guarded by _lock
        self.member_id = str(uuid.uuid4())
        self._member_epoch = JOIN_EPOCH
        self._owned: frozenset[TopicPartition] = NO_PARTITIONS  # what the consumer holds
        # given to the consumer's thread by pending_changes, not acknowledged yet: it may be
        # reading them already, so heartbeats say it owns them (else a revocation of one
        # could be taken as done, and the partition given to another member meanwhile)
        self._handed: frozenset[TopicPartition] = NO_PARTITIONS
        # a loss the consumer's thread has not taken yet: no rejoin before it has (on-lost
        # must run, and its commits must fail, before the member is given anything new)
        self._loss_untaken = False
        self._target: frozenset[TopicPartition] | None = None  # the last answer's
        self._lost: frozenset[TopicPartition] = NO_PARTITIONS  # to tell the consumer
        self._round = 0  # bumped at each loss: an acknowledge from before it is stale
        self._fatal: TwinlogError | None = None
        self._last_poll_s = time.monotonic()
        # the heartbeat thread's own
        self._interval_s = 0.0
        self._failures = 0
        self._last_answer_s = time.monotonic()
        self._matched: tuple[str, ...] = subscription.topics
        self._matched_at_s = float("-inf")
        self._thread = threading.Thread(target=self._run, name="twinlog-heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    # --- the consumer's thread -----------------------------------------------------------

    def polled(self) -> None:
        """The consumer polled: it is alive (``max_poll_interval_ms``)."""
        with self._lock:
            self._last_poll_s = time.monotonic()

    def pending_changes(self) -> MembershipChanges:
        """Raises the fatal error, if one came."""
        with self._lock:
            if self._fatal is not None:
                raise self._fatal
            self.changed.clear()
            lost, self._lost = self._lost, NO_PARTITIONS
            self._loss_untaken = False
            target = self._target
            member = GroupMemberRef(self.member_id, self._member_epoch, self.instance_id)
            if target is None:
                self._handed = NO_PARTITIONS
                return MembershipChanges(lost, NO_PARTITIONS, NO_PARTITIONS, self._round, member)
            self._handed = target - self._owned
            if lost:
                self._wake.set()  # the heartbeat thread waits for this to join again
            return MembershipChanges(lost, self._owned - target, self._handed, self._round, member)

    def acknowledge(self, changes: MembershipChanges) -> bool:
        """The consumer applied ``changes``: say what it owns in the next heartbeat, now.
        False when the membership was lost meanwhile: the consumer drops what ``changes``
        assigned (the next ``pending_changes`` reports the rest as lost)."""
        with self._lock:
            if changes.round != self._round:
                return False
            self._owned = (self._owned - changes.revoked) | changes.assigned
            self._handed = NO_PARTITIONS
        self._wake.set()
        return True

    def subscribed_topics(self) -> set[str]:
        """The topics named, or (a pattern) those it matched at the last look."""
        with self._lock:
            return set(self._matched)

    def owned(self) -> frozenset[TopicPartition]:
        with self._lock:
            return self._owned

    def leave(self) -> None:
        """Stop heartbeating and leave the group (a static member's partitions wait for its
        restart, up to its session timeout). Best effort, within the request timeout."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self._request_timeout_ms / 1000 + 1)
        with self._lock:
            if self._member_epoch == JOIN_EPOCH or self._fatal is not None:
                return  # never joined, or replaced: nothing to leave
            epoch = STATIC_LEAVE_EPOCH if self.instance_id else LEAVE_EPOCH
            self._owned = NO_PARTITIONS
        try:
            self._send(epoch)
        except TwinlogError as error:
            log.info(
                "group %r: leaving failed (%s); the session timeout ends it", self.group_id, error
            )

    # --- the heartbeat thread ------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(timeout=self._interval_s)
            self._wake.clear()
            if self._stop.is_set():
                return
            if self._poll_overdue():
                continue
            with self._lock:
                loss_untaken = self._loss_untaken
            if loss_untaken:  # joins again once poll() has taken the loss (it wakes us)
                self._interval_s = 1.0
                continue
            try:
                self._beat()
            except Exception:  # a bug must not silently end the membership
                log.exception("group %r: heartbeat failed", self.group_id)
                self._interval_s = self._retry.pause_ms(1) / 1000

    def _poll_overdue(self) -> bool:
        """Leave (and lose everything) when the consumer stopped polling, as Kafka's does."""
        with self._lock:
            overdue = time.monotonic() - self._last_poll_s > self._max_poll_interval_ms / 1000
            joined = self._member_epoch != JOIN_EPOCH
        if not overdue:
            return False
        if joined:
            log.warning(
                "group %r: no poll() within max_poll_interval_ms (%d ms): leaving the group; "
                "the consumer joins again at its next poll",
                self.group_id,
                self._max_poll_interval_ms,
            )
            try:
                self._send(LEAVE_EPOCH)
            except TwinlogError as error:
                log.info("group %r: leaving failed: %s", self.group_id, error)
            self._lose()
        self._interval_s = 0.1  # look again soon: the next poll rejoins
        return True

    def _topics(self) -> tuple[str, ...]:
        pattern = self._subscription.pattern
        if pattern is None:
            return self._subscription.topics
        now_s = time.monotonic()
        if now_s - self._matched_at_s >= self._metadata_max_age_ms / 1000:
            matched = tuple(sorted(t for t in self._list_topics() if pattern.fullmatch(t)))
            if not matched and self._matched_at_s == float("-inf"):
                log.warning(
                    "group %r: pattern %r matches no topic yet; topics created later are "
                    "picked up within metadata_max_age_ms (%d ms)",
                    self.group_id,
                    pattern.pattern,
                    self._metadata_max_age_ms,
                )
            with self._lock:
                self._matched = matched
            self._matched_at_s = now_s
        return self._matched

    def _send(self, epoch: int | None = None) -> GroupHeartbeatAnswer:
        topics = self._topics()  # may ask the cluster: not under the lock
        with self._lock:
            call = GroupHeartbeat(
                self.group_id,
                self.member_id,
                self._member_epoch if epoch is None else epoch,
                topics,
                None if self._subscription.pattern is None else self._subscription.pattern.pattern,
                tuple(sorted(self._owned | self._handed)),
                self.instance_id,
                self._client_id,
                self._session_timeout_ms,
                self._max_poll_interval_ms,
            )
        with deadline_at(time.monotonic() + self._request_timeout_ms / 1000):
            return self._heartbeat(call)

    def _beat(self) -> None:
        try:
            answer = self._send()
        except (UnknownMemberIdError, FencedMemberEpochError) as error:
            log.info("group %r: %s; joining again", self.group_id, error)
            self._lose()
            self._interval_s = 0.0
            return
        except FencedInstanceIdError as error:
            with self._lock:
                self._fatal = error
            self.changed.set()
            self._stop.set()
            return
        except TwinlogError as error:
            self._failed(error)
            return
        self._failures = 0
        self._last_answer_s = time.monotonic()
        with self._lock:
            self.member_id = answer.member_id
            self._member_epoch = answer.member_epoch
            target = frozenset(answer.assigned)
            if target != self._target or target != self._owned:
                self.changed.set()
            self._target = target
        self._interval_s = answer.heartbeat_interval_ms / 1000

    def _failed(self, error: TwinlogError) -> None:
        if not error.retriable:
            with self._lock:
                self._fatal = error
            self.changed.set()
            self._stop.set()
            return
        self._failures += 1
        self._interval_s = self._retry.pause_ms(self._failures) / 1000
        silent_s = time.monotonic() - self._last_answer_s
        if silent_s > self._session_timeout_ms / 1000:
            log.warning(
                "group %r: no heartbeat answered for %.0f s (session timeout %d ms): its "
                "partitions are lost; joining again when the coordinator answers (%s)",
                self.group_id,
                silent_s,
                self._session_timeout_ms,
                error,
            )
            self._lose()
            self._last_answer_s = time.monotonic()
        else:
            log.debug("group %r: heartbeat failed: %s; retrying", self.group_id, error)

    def _lose(self) -> None:
        with self._lock:
            self._lost |= self._owned
            self._owned = NO_PARTITIONS
            self._handed = NO_PARTITIONS  # acknowledge() will refuse them (a new round)
            self._loss_untaken = bool(self._lost)
            self._target = None
            self._member_epoch = JOIN_EPOCH
            self._round += 1
        self.changed.set()
