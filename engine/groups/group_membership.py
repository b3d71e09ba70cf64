"""Every consumer group a broker coordinates: heartbeats, expiry, fencing of commits,
and what the group tools ask.

A single-node broker coordinates every group; a cluster broker those that hash to the
``__consumer_offsets`` partitions it leads, and forgets a partition's groups when another
broker takes it over (``drop_groups``); the coordinator that loads them takes their
members back (``restore``), so the members go on there.

``topics``: every topic with its partition count, read at each heartbeat (a pattern
subscription sees new topics, a grown topic is assigned anew). ``persist_change``: makes
what a group's step changed (its new epoch, its changed members) durable, records in
``__consumer_offsets``, before any member is told; without it (``persist_epoch`` only)
just the epochs are durable and members live in this coordinator's memory.
``stored_epoch``: the last durable epoch of a group this coordinator has not seen yet.

Thread rule: any thread may call; each group has its own lock (``_holding``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager

from twinlog.engine.base.errors import InvalidConfigError, NonEmptyGroupError, UnknownMemberIdError
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.groups.classic_member import ClassicMember
from twinlog.engine.groups.consumer_group import ConsumerGroup
from twinlog.engine.groups.durable_member import (
    PersistChange,
    StoredGroup,
    epochs_only,
)
from twinlog.engine.groups.group_calls import (
    GroupDescription,
    GroupHeartbeat,
    GroupHeartbeatAnswer,
    GroupListing,
)

log = logging.getLogger(__name__)

# Bounds on what a member may ask for (Kafka's group.consumer.{min,max}.session.timeout.ms).
SESSION_TIMEOUT_MS_MIN = 1_000
SESSION_TIMEOUT_MS_MAX = 300_000
HEARTBEAT_INTERVAL_MS = 3_000
TOPICS_MAX_AGE_S = 1.0  # a topic created or grown is seen by its groups this late at most  # Kafka's classic consumer default (heartbeat.interval.ms)


class GroupMembership:
    def __init__(
        self,
        topics: Callable[[], Mapping[str, int]],
        persist_epoch: Callable[[str, int], None] | None,
        stored_epoch: Callable[[str], int],
        heartbeat_interval_ms: int = HEARTBEAT_INTERVAL_MS,
        clock: Callable[[], float] = time.monotonic,
        persist_change: PersistChange | None = None,
    ) -> None:
        """One of ``persist_change`` (whole changes) and ``persist_epoch`` (epochs only)."""
        self._topics = topics
        self._topics_read: tuple[float, Mapping[str, int]] | None = None  # (when, what)
        if persist_change is None:
            if persist_epoch is None:
                raise ValueError("a coordinator needs persist_change or persist_epoch")
            persist_change = epochs_only(persist_epoch)
        self._persist = persist_change
        self._stored_epoch = stored_epoch
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self._clock = clock
        self._lock = threading.Lock()  # guards the two dicts only
        self._groups: dict[str, ConsumerGroup] = {}
        # One lock per group, held across a group's whole step: a heartbeat (with the
        # durable write of a new epoch), an expiry, and a commit's check *and* its write
        # (``committing``), so no membership change falls between a commit's check and its
        # append. Other groups are not held up meanwhile.
        self._group_locks: dict[str, threading.RLock] = {}

    def _current_topics(self) -> Mapping[str, int]:
        """The topics, read at most every TOPICS_MAX_AGE_S: on a cluster broker a read is a
        ZooKeeper round trip, and every heartbeat and expiry round needs them."""
        now_s = self._clock()
        read = self._topics_read
        if read is None or now_s - read[0] >= TOPICS_MAX_AGE_S or now_s < read[0]:
            read = (now_s, dict(self._topics()))
            self._topics_read = read
        return read[1]

    @contextmanager
    def _holding(self, group_id: str) -> Iterator[None]:
        with self._lock:
            lock = self._group_locks.setdefault(group_id, threading.RLock())
        with lock:
            yield

    def _group(self, group_id: str) -> ConsumerGroup:
        with self._lock:
            group = self._groups.get(group_id)
        if group is None:
            group = ConsumerGroup(
                group_id,
                self._stored_epoch(group_id),
                self._persist,
                self.heartbeat_interval_ms,
            )
            with self._lock:
                group = self._groups.setdefault(group_id, group)
        return group

    def heartbeat(self, call: GroupHeartbeat) -> GroupHeartbeatAnswer:
        if not call.group_id:
            raise InvalidConfigError("group id must not be empty")
        if not SESSION_TIMEOUT_MS_MIN <= call.session_timeout_ms <= SESSION_TIMEOUT_MS_MAX:
            raise InvalidConfigError(
                f"session_timeout_ms {call.session_timeout_ms} is outside "
                f"{SESSION_TIMEOUT_MS_MIN}..{SESSION_TIMEOUT_MS_MAX}"
            )
        if call.rebalance_timeout_ms is not None and call.rebalance_timeout_ms <= 0:
            raise InvalidConfigError("rebalance_timeout_ms must be positive")
        topics = self._current_topics()
        with self._holding(call.group_id):
            group = self._group(call.group_id)
            epoch_before = group.group_epoch
            answer = group.heartbeat(call, self._clock(), topics)
            if group.group_epoch != epoch_before:
                log.info(
                    "group %r: epoch %d (%d members)",
                    call.group_id,
                    group.group_epoch,
                    len(group.members),
                )
            return answer

    def expire(self) -> None:
        """Remove the members that timed out (the broker's scheduler calls this often).
        The topics are read only when a group has members: on a cluster broker that is a
        ZooKeeper read, not to be made four times a second for nothing."""
        with self._lock:
            groups = [g for g in self._groups.values() if g.members or g.has_unwritten()]
        if not groups:
            return
        topics = self._current_topics()
        for group in groups:
            with self._holding(group.group_id):
                try:
                    removed = group.expire(self._clock(), topics)
                except Exception as error:  # the change could not be made durable: next round
                    log.warning(
                        "group %r: its membership changed and the change is not durable "
                        "yet (%s); retried next round",
                        group.group_id,
                        error,
                    )
                    continue
                for removal in removed:
                    log.info(
                        "group %r: member %s removed: %s",
                        group.group_id,
                        removal.member_id,
                        removal.reason,
                    )

    @contextmanager
    def committing(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        partitions: Iterable[TopicPartition],
        instance_id: str | None = None,
    ) -> Iterator[None]:
        """Check that the commit may go on (``ConsumerGroup.validate_commit``), and hold the
        group still while the caller writes it."""
        with self._holding(group_id):
            with self._lock:
                group = self._groups.get(group_id)
            if group is not None:
                group.validate_commit(member_id, member_epoch, partitions, instance_id)
            elif member_id:
                raise UnknownMemberIdError(
                    f"group {group_id!r} has no member {member_id!r} (its coordinator moved, "
                    "or the group was deleted): join again"
                )
            yield

    def validate_commit(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        partitions: Iterable[TopicPartition],
        instance_id: str | None = None,
    ) -> None:
        """Raise unless the commit may go on (for a check alone: ``committing`` holds the
        group while the commit is written too)."""
        with self.committing(group_id, member_id, member_epoch, partitions, instance_id):
            pass

    @contextmanager
    def emptied(self, group_id: str, what: str) -> Iterator[None]:
        """Raise NonEmptyGroupError if the group has members; else hold it so while the
        caller deletes or resets it."""
        with self._holding(group_id):
            with self._lock:
                group = self._groups.get(group_id)
            if group is not None and group.members:
                raise NonEmptyGroupError(
                    f"group {group_id!r} has {len(group.members)} active member(s): stop its "
                    f"consumers (or wait for their sessions to expire) before {what}"
                )
            if group is not None:
                group.flush()  # the removals of its last members, if not yet durable
            yield

    @contextmanager
    def subscriptions_held(self, group_id: str) -> Iterator[frozenset[str] | None]:
        """The topics the group's members read (None: this coordinator has no such group),
        the group held still while the caller changes its offsets (an OffsetDelete)."""
        with self._holding(group_id):
            with self._lock:
                group = self._groups.get(group_id)
            if group is None:
                yield None
                return
            if not group.members:
                group.flush()  # the removals of its last members, if not yet durable
            yield frozenset(t for m in group.members.values() for t in m.subscribed_topics)

    def classic_member(self, group_id: str, member_id: str) -> ClassicMember | None:
        """What the classic protocol keeps of the member, while the coordinator has it."""
        with self._holding(group_id):
            with self._lock:
                group = self._groups.get(group_id)
            member = None if group is None else group.members.get(member_id)
            return None if member is None else member.classic

    def keep_classic_member(self, classic: ClassicMember) -> bool:
        """Attach ``classic`` to the coordinator's member of its id (after a heartbeat that
        joined or kept it); False when the coordinator no longer has that member."""
        with self._holding(classic.group_id):
            with self._lock:
                group = self._groups.get(classic.group_id)
            member = None if group is None else group.members.get(classic.member_id)
            if member is None:
                return False
            member.classic = classic
            return True

    def describe(self, group_id: str) -> GroupDescription | None:
        """None when this coordinator has never seen the group's members."""
        with self._holding(group_id):
            with self._lock:
                group = self._groups.get(group_id)
            return None if group is None else group.describe()

    def listings(self) -> list[GroupListing]:
        with self._lock:
            groups = sorted(self._groups.values(), key=lambda g: g.group_id)
        listings = []
        for group in groups:
            with self._holding(group.group_id):
                listings.append(
                    GroupListing(
                        group.group_id, group.state(), len(group.members), group.group_type()
                    )
                )
        return listings

    def forget(self, group_id: str) -> None:
        """Forget an empty group's membership, if any (its offsets are the broker's to
        delete). The caller holds it emptied (``emptied``)."""
        with self._lock:
            self._groups.pop(group_id, None)

    def restore(self, groups: Iterable[StoredGroup]) -> None:
        """Take back the members of groups this coordinator has just loaded (their
        sessions start now). Called while the groups' offsets partition is loading, when
        no call reaches them; takes no group's lock (the load holds the lock that a
        group's write waits for)."""
        now_s = self._clock()
        for stored in groups:
            group = ConsumerGroup(
                stored.group_id, stored.group_epoch, self._persist, self.heartbeat_interval_ms
            )
            group.restore(stored.members, now_s)
            with self._lock:
                self._groups[stored.group_id] = group
            log.info(
                "group %r: %d member(s) restored at epoch %d",
                stored.group_id,
                len(group.members),
                group.group_epoch,
            )

    def drop_groups(self, belongs: Callable[[str], bool]) -> None:
        """Forget the groups ``belongs`` names (their coordinator moved elsewhere)."""
        with self._lock:
            for group_id in [g for g in self._groups if belongs(g)]:
                del self._groups[group_id]
