"""One consumer group at its coordinator: members, the group epoch, the target assignment,
and the rule that fences commits by generation (KIP-848 membership, KIP-447 fencing).

The group epoch bumps on every change of membership, subscriptions, or the partitions of
the subscribed topics; each bump computes a new target assignment (``assignor``) at that
epoch. Members converge to it one heartbeat at a time (``member_assignment``), never
owning a partition two at once. A member's epoch is the group epoch it last reached.

A commit (plain or a transaction's offsets) is accepted from a member for a partition it
owns, with a member epoch no older than the epoch in which it was given that partition
(``validate_commit``): a zombie, whose session expired or whose instance id was taken
over, is unknown; one that lost the partition and got it back later carries an older
epoch. Commits from outside the group (``NO_MEMBER_EPOCH``) are accepted only while the
group has no members, as Kafka's "simple" consumers.

A pattern subscription is matched by the consumer against the topics it sees (as Kafka's
classic consumer does), which subscribes to the topics it matched: the coordinator never
runs a member's regular expression (a catastrophic one would stall every group here; Kafka
runs RE2/J for this reason), and keeps the pattern only to describe the member.

Static members (``instance_id``): a join with an instance id already in the group takes
over that member's assignment and epoch without a rebalance (the restart of a process),
and fences the member it replaces (FencedInstanceIdError); a static member that leaves
with STATIC_LEAVE_EPOCH keeps its partitions until its session times out. A member of
KIP-848's protocol takes over only a member that left so (as Kafka's coordinator): while
the holder of the instance id is live, the join is UnreleasedInstanceIdError.

Durability: each step (a heartbeat, a leave, an expiry round) ends by writing what it
changed, the group epoch and the changed or removed members (``durable_member``), in one
change (``persist``), before any member is told of it: whatever a member was told is
durable, so epochs only grow across coordinator moves, and a coordinator that loads the
group (``restore``) takes its members back with their epochs and assignments. A member
that heartbeats the new coordinator goes on where it was; one that never comes back
expires after a full session from the load. A write that fails fails the step (the member
is told nothing, retriable); the memory is then ahead of the log, and the next step (or
expiry round) writes the difference.

Thread rule: the caller (``GroupMembership``) holds its lock around every method.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from twinlog.engine.base.errors import (
    FencedInstanceIdError,
    FencedMemberEpochError,
    GroupIdNotFoundError,
    InvalidConfigError,
    NonEmptyGroupError,
    NotEnoughResourcesError,
    StaleMemberEpochError,
    UnknownMemberIdError,
    UnreleasedInstanceIdError,
)
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.groups.assignor import assign_uniform
from twinlog.engine.groups.classic_member import ClassicMember
from twinlog.engine.groups.durable_member import DurableMember, GroupChange, PersistChange
from twinlog.engine.groups.group_calls import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    NO_MEMBER_EPOCH,
    PROTOCOL_CLASSIC,
    PROTOCOL_CONSUMER,
    PROTOCOL_TWINLOG,
    REBALANCE_TIMEOUT_MS_DEFAULT,
    STATIC_LEAVE_EPOCH,
    GroupDescription,
    GroupHeartbeat,
    GroupHeartbeatAnswer,
    MemberDescription,
)
from twinlog.engine.groups.member_assignment import MemberAssignment, MemberState, reconcile

REPLACED_MEMBERS_MAX = 1_000  # member ids replaced by a static rejoin, remembered to say so
MEMBERS_MAX = 1_000  # per group (Kafka's group.consumer.max.size): memory, and assignor time


@dataclass
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    subscribed_topics: tuple[str, ...]
    subscribed_pattern: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    session_deadline_s: float  # monotonic: removed when no heartbeat came by then
    assignment: MemberAssignment = field(default_factory=MemberAssignment)
    previous_member_epoch: int = -1  # a heartbeat whose answer was lost carries this one
    revoke_deadline_s: float | None = None  # monotonic, while UNREVOKED_PARTITIONS
    left_static: bool = False  # left with STATIC_LEAVE_EPOCH: kept for its restart
    # a member of Kafka's classic protocol: what it keeps between calls (its lifetime is
    # this member's: removed with it)
    classic: ClassicMember | None = None
    # the protocol it last heartbeat in (PROTOCOL_*; durable: a member taken back from the
    # log keeps its kind, and so does its group)
    protocol: str = PROTOCOL_TWINLOG


@dataclass(frozen=True)
class Removal:
    member_id: str
    reason: str


class ConsumerGroup:
    def __init__(
        self,
        group_id: str,
        group_epoch: int,
        persist: PersistChange,
        heartbeat_interval_ms: int,
    ) -> None:
        """``group_epoch``: the last one made durable (0 for a new group)."""
        self.group_id = group_id
        self.group_epoch = group_epoch
        self.members: dict[str, Member] = {}
        self.target: dict[str, frozenset[TopicPartition]] = {}
        self._persist_change = persist
        self._heartbeat_interval_ms = heartbeat_interval_ms
        self._static: dict[str, str] = {}  # instance id -> member id
        self._replaced: dict[str, str] = {}  # member id -> the instance id that replaced it
        self._topics_seen: dict[str, int] = {}  # subscribed topics' partition counts at the target
        self._bump_owed = False  # a member joined again: its new generation needs a new epoch
        # What the log holds: the epoch and each member as last written (or loaded). Every
        # member told anything is in it as told; ``_unwritten`` names the members that may
        # differ from it (changed, added or removed since the last write).
        self._durable_epoch = group_epoch
        self._durable: dict[str, DurableMember] = {}
        self._unwritten: set[str] = set()

    # --- heartbeats ------------------------------------------------------------------------

    def heartbeat(
        self, call: GroupHeartbeat, now_s: float, topics: Mapping[str, int]
    ) -> GroupHeartbeatAnswer:
        """One member's heartbeat (join, leave, or keep-alive); ``topics``: every topic
        with its partition count."""
        if call.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(call, now_s, topics)
        self._check_protocol(call)
        reported = None if call.owned is None else frozenset(call.owned)
        if call.member_epoch == JOIN_EPOCH:
            member = self._join(call, now_s)
        else:
            member = self._known(call.member_id, call.instance_id)
            epochs = (member.assignment.member_epoch, member.previous_member_epoch)
            if call.member_epoch not in epochs:
                self._remove(member.member_id)
                self._bump(topics)
                self._persist()
                raise FencedMemberEpochError(
                    f"member {call.member_id} of group {self.group_id!r} sent member epoch "
                    f"{call.member_epoch}, its epoch is {member.assignment.member_epoch}: "
                    "it was fenced; join again"
                )
            if call.member_epoch != member.assignment.member_epoch:
                # Its last answer was lost (accepted, as Kafka's), but what it says it owns
                # was said before that answer: it must not finish a revocation.
                reported = None
        self._unwritten.add(member.member_id)
        if call.protocol:
            member.protocol = call.protocol
        member.session_timeout_ms = call.session_timeout_ms
        if call.rebalance_timeout_ms is not None:
            member.rebalance_timeout_ms = call.rebalance_timeout_ms
        member.session_deadline_s = now_s + call.session_timeout_ms / 1000
        member.client_id = call.client_id
        member.subscribed_pattern = call.subscribed_pattern
        subscription = (
            member.subscribed_topics
            if call.subscribed_topics is None
            else tuple(sorted(set(call.subscribed_topics)))
        )
        if subscription != member.subscribed_topics:
            member.subscribed_topics = subscription
            self._bump(topics)
        elif self._bump_owed or self._subscribed_counts(topics) != self._topics_seen:
            self._bump(topics)  # a subscribed topic was created, deleted or grown
        assigned_before = member.assignment.assigned.keys()
        self._reconcile(member, reported, now_s)
        self._persist()  # raises, retriable: the member is told nothing
        return GroupHeartbeatAnswer(
            member.member_id,
            member.assignment.member_epoch,
            self._interval_ms(),
            tuple(sorted(member.assignment.assigned)),
            assignment_changed=member.assignment.assigned.keys() != assigned_before,
        )

    def _join(self, call: GroupHeartbeat, now_s: float) -> Member:
        if call.owned:
            raise InvalidConfigError(
                "a joining member owns no partitions: give up every partition before "
                f"joining group {self.group_id!r} again"
            )
        member_id = call.member_id or str(uuid.uuid4())
        replaced_id = self._static.get(call.instance_id) if call.instance_id else None
        if replaced_id is not None and replaced_id != member_id:
            held = self.members[replaced_id]
            if call.protocol == PROTOCOL_CONSUMER and not held.left_static:
                raise UnreleasedInstanceIdError(
                    f"instance id {call.instance_id!r} of group {self.group_id!r} is held by "
                    f"live member {replaced_id}: it is released when that member leaves or "
                    "its session times out; two consumers must not share an instance id"
                )
            # a restart of a static member: it takes over the old one's place, no rebalance
            member = self.members.pop(replaced_id)
            self._unwritten.update((replaced_id, member_id))
            self.target[member_id] = self.target.pop(replaced_id, frozenset())
            self._replaced[replaced_id] = call.instance_id or ""
            while len(self._replaced) > REPLACED_MEMBERS_MAX:
                del self._replaced[next(iter(self._replaced))]
            member.member_id, member.left_static = member_id, False
            self.members[member_id] = member
            self._static[call.instance_id or ""] = member_id
            return member
        existing = self.members.get(member_id)
        if existing is not None:
            # Joins again (a lost answer, or after losing its partitions): it owns nothing,
            # and gets its partitions back in a new generation, so a commit it made before
            # (from the positions it had then) is told apart from one made after.
            existing.assignment = MemberAssignment(MemberState.STABLE, 0)
            existing.left_static = False
            existing.revoke_deadline_s = None
            self._bump_owed = True
            return existing
        if len(self.members) >= MEMBERS_MAX:
            raise NotEnoughResourcesError(
                f"group {self.group_id!r} has {MEMBERS_MAX} members, the most a group may have"
            )
        member = Member(
            member_id,
            call.instance_id,
            call.client_id,
            (),
            None,
            call.session_timeout_ms,
            (
                REBALANCE_TIMEOUT_MS_DEFAULT
                if call.rebalance_timeout_ms is None
                else call.rebalance_timeout_ms
            ),
            now_s + call.session_timeout_ms / 1000,
        )
        self.members[member_id] = member
        if call.instance_id:
            self._static[call.instance_id] = member_id
        return member

    def _leave(
        self, call: GroupHeartbeat, now_s: float, topics: Mapping[str, int]
    ) -> GroupHeartbeatAnswer:
        member = self.members.get(call.member_id)
        if member is not None:
            if call.member_epoch == STATIC_LEAVE_EPOCH and member.instance_id:
                member.left_static = True  # its partitions wait for its restart
                member.session_deadline_s = now_s + member.session_timeout_ms / 1000
                self._unwritten.add(member.member_id)
            else:
                self._remove(member.member_id)
                self._bump(topics)
            self._persist()
        return GroupHeartbeatAnswer(call.member_id, call.member_epoch, self._interval_ms())

    def _check_protocol(self, call: GroupHeartbeat) -> None:
        """A group is of Kafka's classic kind or of KIP-848's while it has members of that
        kind: a member of the other kind is refused (GroupIdNotFoundError, as Kafka's
        "Group ... is not a consumer group"; the classic door says it
        INCONSISTENT_GROUP_PROTOCOL). twinlog's own members are of no kind."""
        if not call.protocol:
            return
        for other in self.members.values():
            if other.member_id != call.member_id and other.protocol not in (
                PROTOCOL_TWINLOG,
                call.protocol,
            ):
                raise GroupIdNotFoundError(
                    f"group {self.group_id!r} is a {other.protocol} group (member "
                    f"{other.member_id} uses Kafka's {other.protocol} protocol): a member of "
                    f"the {call.protocol} protocol cannot join it while it has members; every "
                    "consumer of a group needs the same group.protocol"
                )

    def group_type(self) -> str:
        """How Kafka's tools list it: consumer while a member speaks KIP-848's protocol."""
        if any(m.protocol == PROTOCOL_CONSUMER for m in self.members.values()):
            return PROTOCOL_CONSUMER
        return PROTOCOL_CLASSIC

    def _known(self, member_id: str, instance_id: str | None) -> Member:
        member = self.members.get(member_id)
        if member is not None:
            return member
        replaced_by = self._replaced.get(member_id)
        if replaced_by is not None:
            raise FencedInstanceIdError(
                f"member {member_id} of group {self.group_id!r} was replaced by a newer "
                f"consumer with instance id {replaced_by!r}: close this one"
            )
        raise UnknownMemberIdError(
            f"group {self.group_id!r} has no member {member_id!r} (it left, its session "
            "expired, or the group's coordinator moved): join again"
        )

    def _interval_ms(self) -> int:
        # While members move partitions, a short interval: each step waits for a heartbeat.
        if self.state() == "reconciling":
            return min(self._heartbeat_interval_ms, 200)
        return self._heartbeat_interval_ms

    # --- the target and each member's step toward it --------------------------------------

    def _subscribed(self) -> dict[str, frozenset[str]]:
        return {m.member_id: frozenset(m.subscribed_topics) for m in self.members.values()}

    def _subscribed_counts(self, topics: Mapping[str, int]) -> dict[str, int]:
        wanted = {t for m in self.members.values() for t in m.subscribed_topics}
        return {t: topics[t] for t in sorted(wanted) if t in topics}

    def _bump(self, topics: Mapping[str, int]) -> None:
        """A new group epoch and the target assignment at it (made durable with the rest
        of the step, before anyone is told: ``_persist``)."""
        self.group_epoch += 1
        self._bump_owed = False
        self.target = assign_uniform(self._subscribed(), topics, self.target)
        self._topics_seen = self._subscribed_counts(topics)
        self._unwritten.update(self.members)  # any member's target may have moved

    def _reconcile(
        self, member: Member, reported: frozenset[TopicPartition] | None, now_s: float
    ) -> None:
        others = {
            p
            for other in self.members.values()
            if other is not member
            for p in other.assignment.owned()
        }
        before = member.assignment
        after = reconcile(
            before,
            self.target.get(member.member_id, frozenset()),
            self.group_epoch,
            others.__contains__,
            reported,
        )
        if after.member_epoch != before.member_epoch:
            member.previous_member_epoch = before.member_epoch
        if after.state is MemberState.UNREVOKED_PARTITIONS:
            if member.revoke_deadline_s is None:
                member.revoke_deadline_s = now_s + member.rebalance_timeout_ms / 1000
        else:
            member.revoke_deadline_s = None
        member.assignment = after

    # --- time ------------------------------------------------------------------------------

    def expire(self, now_s: float, topics: Mapping[str, int]) -> list[Removal]:
        """Remove the members whose session timed out, or who did not revoke within their
        rebalance timeout; the others' target moves on."""
        removed = []
        for member in list(self.members.values()):
            if now_s >= member.session_deadline_s:
                reason = f"no heartbeat within its session timeout ({member.session_timeout_ms} ms)"
            elif member.revoke_deadline_s is not None and now_s >= member.revoke_deadline_s:
                reason = (
                    f"did not revoke partitions within its rebalance timeout "
                    f"({member.rebalance_timeout_ms} ms)"
                )
            else:
                continue
            self._remove(member.member_id)
            removed.append(Removal(member.member_id, reason))
        if removed or self._bump_owed:
            self._bump(topics)
        self._persist()  # also what an earlier step could not write
        return removed

    def _remove(self, member_id: str) -> None:
        member = self.members.pop(member_id)
        self._unwritten.add(member_id)
        self.target.pop(member_id, None)
        if member.instance_id and self._static.get(member.instance_id) == member_id:
            del self._static[member.instance_id]

    # --- durability ------------------------------------------------------------------------

    def _persist(self) -> None:
        """Write what differs from the log (module docstring), as one change; nothing when
        nothing does (a keep-alive heartbeat writes nothing). Raises, retriable, when the
        write fails: what it had to write stays unwritten for the next step."""
        changed: list[DurableMember] = []
        removed: list[str] = []
        for member_id in sorted(self._unwritten):
            member = self.members.get(member_id)
            if member is None:
                if member_id in self._durable:
                    removed.append(member_id)
            else:
                durable = self._durable_of(member)
                if self._durable.get(member_id) != durable:
                    changed.append(durable)
        epoch = None if self.group_epoch == self._durable_epoch else self.group_epoch
        if changed or removed or epoch is not None:
            self._persist_change(GroupChange(self.group_id, epoch, tuple(changed), tuple(removed)))
        for durable in changed:
            self._durable[durable.member_id] = durable
        for member_id in removed:
            del self._durable[member_id]
        self._durable_epoch = self.group_epoch
        self._unwritten.clear()

    def flush(self) -> None:
        """Write what earlier steps could not (before the group is deleted: a member the
        log still held would come back at the next load)."""
        self._persist()

    def has_unwritten(self) -> bool:
        return bool(self._unwritten)

    def _durable_of(self, member: Member) -> DurableMember:
        return DurableMember(
            member.member_id,
            member.instance_id,
            member.client_id,
            member.subscribed_topics,
            member.subscribed_pattern,
            member.session_timeout_ms,
            member.rebalance_timeout_ms,
            member.assignment,
            member.previous_member_epoch,
            member.left_static,
            self.target.get(member.member_id, frozenset()),
            member.protocol,
        )

    def restore(self, members: Iterable[DurableMember], now_s: float) -> None:
        """Take back the members the log holds (this coordinator has just loaded the
        group, which has no members yet): each gets a full session from ``now_s``, and one
        that was revoking a full rebalance timeout, to reach this coordinator."""
        assert not self.members, "restore into a group that has members"
        for durable in members:
            assignment = durable.assignment
            revoking = assignment.state is MemberState.UNREVOKED_PARTITIONS
            self.members[durable.member_id] = Member(
                durable.member_id,
                durable.instance_id,
                durable.client_id,
                durable.subscribed_topics,
                durable.subscribed_pattern,
                durable.session_timeout_ms,
                durable.rebalance_timeout_ms,
                session_deadline_s=now_s + durable.session_timeout_ms / 1000,
                assignment=assignment,
                previous_member_epoch=durable.previous_member_epoch,
                revoke_deadline_s=(
                    now_s + durable.rebalance_timeout_ms / 1000 if revoking else None
                ),
                left_static=durable.left_static,
                protocol=durable.protocol,
            )
            if durable.target:
                self.target[durable.member_id] = durable.target
            if durable.instance_id:
                self._static[durable.instance_id] = durable.member_id
            self._durable[durable.member_id] = durable
            # never below an epoch a member was told (the epoch record is written with them)
            self.group_epoch = max(self.group_epoch, assignment.member_epoch)
        self._durable_epoch = self.group_epoch
        # The target covers every partition of each subscribed topic that existed when it
        # was made: the counts it saw follow from it (no bump for topics that did not change).
        seen: dict[str, int] = {}
        for partitions in self.target.values():
            for partition in partitions:
                seen[partition.topic] = max(seen.get(partition.topic, 0), partition.partition + 1)
        self._topics_seen = dict(sorted(seen.items()))

    # --- commits ---------------------------------------------------------------------------

    def validate_commit(
        self,
        member_id: str,
        member_epoch: int,
        partitions: Iterable[TopicPartition],
        instance_id: str | None = None,
    ) -> None:
        """Raise unless this member, in this generation, may commit offsets of ``partitions``
        (module docstring)."""
        if member_epoch == NO_MEMBER_EPOCH and not member_id:
            if self.members:
                raise NonEmptyGroupError(
                    f"group {self.group_id!r} has {len(self.members)} active member(s): a "
                    "commit from outside the group (without group_metadata(), from assign(), "
                    "or a tool's reset) is refused; commit from a member, or stop the "
                    "group's consumers first"
                )
            return
        member = self._known(member_id, instance_id)
        if member_epoch > member.assignment.member_epoch:
            raise StaleMemberEpochError(
                f"member {member_id} of group {self.group_id!r} committed with member epoch "
                f"{member_epoch}, newer than its epoch {member.assignment.member_epoch}"
            )
        for partition in partitions:
            given_in = member.assignment.owns(TopicPartition(*partition))
            if given_in is None:
                raise StaleMemberEpochError(
                    f"member {member_id} of group {self.group_id!r} does not own {partition} "
                    f"(epoch {member_epoch}): its commit is refused; abort the transaction"
                )
            if member_epoch < given_in:
                raise StaleMemberEpochError(
                    f"member {member_id} of group {self.group_id!r} committed {partition} "
                    f"from epoch {member_epoch}, but it was given that partition again in "
                    f"epoch {given_in}: the commit is a zombie's and is refused"
                )

    # --- what it is ------------------------------------------------------------------------

    def state(self) -> str:
        if not self.members:
            return "empty"
        for member in self.members.values():
            if (
                member.assignment.state is not MemberState.STABLE
                or member.assignment.member_epoch != self.group_epoch
            ):
                return "reconciling"
        return "stable"

    def describe(self) -> GroupDescription:
        members = tuple(
            MemberDescription(
                member.member_id,
                member.instance_id,
                member.client_id,
                member.assignment.member_epoch,
                member.assignment.state.value,
                member.subscribed_topics,
                member.subscribed_pattern,
                tuple(sorted(member.assignment.assigned)),
                tuple(sorted(member.assignment.revoking)),
                tuple(sorted(self.target.get(member.member_id, ()))),
            )
            for member in sorted(self.members.values(), key=lambda m: m.member_id)
        )
        return GroupDescription(
            self.group_id, self.state(), self.group_epoch, members, group_type=self.group_type()
        )
