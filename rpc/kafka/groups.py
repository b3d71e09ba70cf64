"""Kafka's classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) onto
twinlog's group coordinator, which assigns partitions itself (KIP-848's way).

Every member is told it is not the leader (the leader's name is ``COORDINATOR_ASSIGNS``,
nobody's member id), so no client runs an assignor: each sends SyncGroup with no
assignments and gets the partitions the coordinator's uniform assignor gave it. A
member's generation is its member epoch at the coordinator, so offset commits from a
member are fenced by the coordinator's rules (``engine/groups``).

How an assignment changes: each Heartbeat is a coordinator heartbeat that reports the
partitions the member was given; when the coordinator's answer differs (a member joined,
left or timed out, a subscribed topic grew), the member is answered
REBALANCE_IN_PROGRESS and joins again. An eager client (range, roundrobin, sticky) has
given up every partition by then; a cooperative one (cooperative-sticky) still reports
the ones it kept, in its subscription's owned partitions.

What the protocol keeps of a member between its calls (``ClassicMember``) is kept with
the coordinator's own member (``Broker.keep_classic_member``): it goes when the member
does (timed out, left, fenced, its group moved), and a restarted listener finds it.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)

from twinlog.engine.base.errors import (
    FencedMemberEpochError,
    TwinlogError,
    UnknownMemberIdError,
)
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.groups.classic_member import ClassicMember
from twinlog.engine.groups.group_calls import JOIN_EPOCH, LEAVE_EPOCH, GroupHeartbeatAnswer
from twinlog.rpc.kafka.access import authorize
from twinlog.rpc.kafka.context import KafkaContext
from twinlog.rpc.kafka.error_codes import (
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    NONE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    code_of,
)
from twinlog.rpc.policy.auth import Operation, Resource

CONSUMER_PROTOCOL_TYPE = "consumer"
COORDINATOR_ASSIGNS = "twinlog-coordinator-assigns"  # no member's id: nobody leads
COOPERATIVE_PROTOCOLS = frozenset({"cooperative-sticky"})
ASSIGNMENT_VERSION = 0  # every version has the same fields; 0 is read by every client
REBALANCE_TIMEOUT_MS_DEFAULT = 300_000


def _subscription(protocols: list[Any]) -> tuple[str, Any] | None:
    """The protocol chosen (an eager one when the client offers one) and its decoded
    subscription; None when the client offers none this coordinator can read."""
    offered = sorted(protocols, key=lambda item: item.name in COOPERATIVE_PROTOCOLS)
    for protocol in offered:
        try:
            return protocol.name, ConsumerProtocolSubscription.decode(bytes(protocol.metadata))
        except Exception:  # the codec raises plain exceptions on bytes it cannot read
            continue
    return None


def _owned(subscription: Any) -> tuple[TopicPartition, ...]:
    return tuple(
        TopicPartition(item.topic, index)
        for item in (subscription.owned_partitions or [])
        for index in item.partitions
    )


def assignment_bytes(partitions: tuple[TopicPartition, ...]) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for topic_partition in sorted(partitions):
        by_topic.setdefault(topic_partition.topic, []).append(topic_partition.partition)
    Assigned = ConsumerProtocolAssignment.TopicPartition
    assignment = ConsumerProtocolAssignment(
        version=ASSIGNMENT_VERSION,
        assigned_partitions=[Assigned(topic=topic, partitions=p) for topic, p in by_topic.items()],
        user_data=None,
    )
    return bytes(assignment.encode(version=ASSIGNMENT_VERSION))


def _join_answer(version: int, error_code: int, **fields: Any) -> JoinGroupResponse:
    return JoinGroupResponse(
        version=version,
        throttle_time_ms=0,
        error_code=error_code,
        generation_id=fields.get("generation_id", -1),
        protocol_type=CONSUMER_PROTOCOL_TYPE,
        protocol_name=fields.get("protocol_name", ""),
        leader=COORDINATOR_ASSIGNS,
        skip_assignment=False,
        member_id=fields.get("member_id", ""),
        members=[],
    )


def _group_denied(context: KafkaContext, group_id: str) -> int:
    """NONE, or GROUP_AUTHORIZATION_FAILED: membership needs READ on the group, as its
    offsets do (and as Kafka's membership calls do)."""
    return authorize(
        context.guard, context.connection.principal, Operation.READ, (group_id,), Resource.GROUP
    )


def handle_join_group(
    request: JoinGroupRequest, version: int, context: KafkaContext
) -> JoinGroupResponse:
    denied = _group_denied(context, request.group_id)
    if denied:
        return _join_answer(version, denied)
    chosen = _subscription(list(request.protocols))
    if request.protocol_type != CONSUMER_PROTOCOL_TYPE or chosen is None:
        return _join_answer(version, INCONSISTENT_GROUP_PROTOCOL)
    protocol_name, subscription = chosen
    broker = context.broker
    known = (
        broker.classic_member(request.group_id, request.member_id) if request.member_id else None
    )
    member = known or ClassicMember(
        group_id=request.group_id,
        member_id=request.member_id,
        instance_id=request.group_instance_id,
        client_id=(request.header.client_id or "") if request.header else "",
        protocol_name=protocol_name,
        subscribed_topics=(),
        session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=request.rebalance_timeout_ms
        if request.rebalance_timeout_ms > 0
        else REBALANCE_TIMEOUT_MS_DEFAULT,
        generation=JOIN_EPOCH,
        member_epoch=JOIN_EPOCH,
        given=(),
    )
    member.protocol_name = protocol_name
    member.subscribed_topics = tuple(sorted(set(subscription.topics)))
    member.session_timeout_ms = request.session_timeout_ms
    # An eager client gave up everything before joining again; a cooperative one says what
    # it kept.
    owned = _owned(subscription) if protocol_name in COOPERATIVE_PROTOCOLS else ()
    try:
        if known is None:
            answer = context.broker.group_heartbeat(member.heartbeat((), JOIN_EPOCH))
        else:
            try:
                answer = context.broker.group_heartbeat(member.heartbeat(owned))
            except (FencedMemberEpochError, UnknownMemberIdError):
                # removed meanwhile (timed out): joins again under the same id
                answer = context.broker.group_heartbeat(member.heartbeat((), JOIN_EPOCH))
    except TwinlogError as error:
        return _join_answer(version, code_of(error, JoinGroupRequest.API_KEY))
    _remember(context, member, answer)
    return _join_answer(
        version,
        NONE,
        generation_id=member.generation,
        protocol_name=protocol_name,
        member_id=member.member_id,
    )


def _remember(context: KafkaContext, member: ClassicMember, answer: GroupHeartbeatAnswer) -> None:
    """Keep the joined member with the coordinator's (the id it named, when it named one)."""
    member.member_id = answer.member_id
    member.member_epoch = member.generation = answer.member_epoch
    member.given = answer.assigned
    context.broker.keep_classic_member(member)  # False: gone at once; its next call rejoins


def handle_sync_group(
    request: SyncGroupRequest, version: int, context: KafkaContext
) -> SyncGroupResponse:
    member = context.broker.classic_member(request.group_id, request.member_id)
    given: tuple[TopicPartition, ...] = ()
    denied = _group_denied(context, request.group_id)
    if denied:
        error_code = denied
    elif member is None:
        error_code = UNKNOWN_MEMBER_ID
    elif request.generation_id != member.generation:
        error_code = ILLEGAL_GENERATION
    else:
        error_code, given = NONE, member.given
    return SyncGroupResponse(
        version=version,
        throttle_time_ms=0,
        error_code=error_code,
        protocol_type=CONSUMER_PROTOCOL_TYPE,
        protocol_name=member.protocol_name if member else None,
        assignment=assignment_bytes(given) if error_code == NONE else b"",
    )


def handle_heartbeat(
    request: HeartbeatRequest, version: int, context: KafkaContext
) -> HeartbeatResponse:
    member = context.broker.classic_member(request.group_id, request.member_id)
    denied = _group_denied(context, request.group_id)
    if denied:
        error_code = denied
    elif member is None:
        error_code = UNKNOWN_MEMBER_ID
    elif request.generation_id != member.generation:
        error_code = ILLEGAL_GENERATION
    else:
        try:
            answer = context.broker.group_heartbeat(member.heartbeat(member.given))
            member.member_epoch = answer.member_epoch
            # The coordinator moved partitions: join again to learn the new ones. An equal
            # assignment under a newer epoch changes nothing the client holds (its commits
            # stay valid: the partitions were given in its generation or before).
            changed = set(answer.assigned) != set(member.given)
            error_code = REBALANCE_IN_PROGRESS if changed else NONE
        except TwinlogError as error:  # a fenced or unknown member is gone with its state
            error_code = code_of(error, HeartbeatRequest.API_KEY)
    return HeartbeatResponse(version=version, throttle_time_ms=0, error_code=error_code)


def handle_leave_group(
    request: LeaveGroupRequest, version: int, context: KafkaContext
) -> LeaveGroupResponse:
    denied = _group_denied(context, request.group_id)
    if denied:
        return LeaveGroupResponse(
            version=version, throttle_time_ms=0, error_code=denied, members=[]
        )
    if version < 3:
        leaving = [(request.member_id, None)]
    else:
        leaving = [(item.member_id, item.group_instance_id) for item in request.members]
    results = []
    for member_id, instance_id in leaving:
        member = context.broker.classic_member(request.group_id, member_id)
        error_code = NONE
        if member is None:
            error_code = UNKNOWN_MEMBER_ID
        else:
            try:
                context.broker.group_heartbeat(member.heartbeat((), LEAVE_EPOCH))
            except (FencedMemberEpochError, UnknownMemberIdError):
                pass  # gone already: what leaving wants
            except TwinlogError as error:
                error_code = code_of(error, LeaveGroupRequest.API_KEY)
        results.append(
            LeaveGroupResponse.MemberResponse(
                member_id=member_id, group_instance_id=instance_id, error_code=error_code
            )
        )
    top_error = results[0].error_code if version < 3 and results else NONE
    return LeaveGroupResponse(
        version=version, throttle_time_ms=0, error_code=top_error, members=results
    )
