"""KIP-848's ConsumerGroupHeartbeat (key 68) onto twinlog's group coordinator, which
already works this way: the broker assigns (its uniform, sticky
assignor), each heartbeat carries the member's epoch, and a partition moves to a new
owner only once its old owner's heartbeat no longer holds it (``engine/groups``).

Versions: v0 as Kafka 3.8.0 has it (the coordinator names a member joining with an empty
id), and v1, Kafka 4.0's, ahead of the release twinlog answers as: librdkafka (confluent-
kafka) 2.10 and later speak only v1 (the consumer names itself; a subscription may be a
regular expression, resolved here with RE2 to the topics it matches, ``topic_regex``, at
every heartbeat, so a topic created later is subscribed; one that does not compile is
INVALID_REGULAR_EXPRESSION with RE2's reason, and logged).

What the door adds is Kafka's wire: a heartbeat says only what changed since the last one
(null subscription, rebalance timeout and owned partitions keep the member's), partitions
are named by topic id, the session timeout is the broker's
(server config key ``group.consumer.session.timeout.ms``, as Kafka's), and the
assignment is answered to a full heartbeat (a join, or one with all three fields) or when
it changed. A request Kafka calls invalid is answered INVALID_REQUEST with Kafka's reason.

Access: READ on the group (as Kafka), and READ on every subscribed topic (Kafka 4.0 asks
DESCRIBE on them; twinlog asks READ, since a consumer reads what it subscribes to); a refusal is audited. A group whose members joined with Kafka's classic
protocol refuses this one (GROUP_ID_NOT_FOUND, "not a consumer group", as Kafka 3.8 with
its migration policy off), and the classic door refuses a member of this one
(INCONSISTENT_GROUP_PROTOCOL).
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from twinlog.engine.base.errors import TwinlogError
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.groups.group_calls import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    PROTOCOL_CONSUMER,
    STATIC_LEAVE_EPOCH,
    GroupHeartbeat,
)
from twinlog.rpc.kafka.access import authorize, may
from twinlog.rpc.kafka.context import KafkaContext
from twinlog.rpc.kafka.error_codes import (
    INVALID_REQUEST,
    NONE,
    UNSUPPORTED_ASSIGNOR,
    code_of,
)
from twinlog.rpc.kafka.messages import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from twinlog.rpc.kafka.metadata import name_of_topic_id, topic_uuid
from twinlog.rpc.kafka.topic_regex import InvalidTopicRegex, compile_topic_regex, topics_matching
from twinlog.rpc.policy.auth import Operation, Resource

log = logging.getLogger("twinlog.kafka")

# Kafka's server assignors (group.consumer.assignors); both are twinlog's uniform one here:
# a member asking for range gets the same balanced, sticky assignment.
SERVER_ASSIGNORS = ("uniform", "range")
NO_EPOCH = -1
# v1 (Kafka 4.0's, which librdkafka 2.10+ requires): the consumer names itself (a UUID it
# keeps) and may subscribe by regular expression
CLIENT_MEMBER_ID_VERSION = 1
INVALID_REGULAR_EXPRESSION = 128  # Kafka's code (newer than the codec's error classes)

Assignment = ConsumerGroupHeartbeatResponse.Assignment
AssignedTopic = Assignment.TopicPartitions


def _answer(version: int, error_code: int, message: str | None = None, **fields: Any) -> Any:
    return ConsumerGroupHeartbeatResponse(
        version=version,
        throttle_time_ms=0,
        error_code=error_code,
        error_message=message,
        member_id=fields.get("member_id"),
        member_epoch=fields.get("member_epoch", NO_EPOCH),
        heartbeat_interval_ms=fields.get("heartbeat_interval_ms", 0),
        assignment=fields.get("assignment"),
    )


def _client_id(request: ConsumerGroupHeartbeatRequest) -> str:
    return (request.header.client_id or "") if request.header else ""


def invalid_reason(request: ConsumerGroupHeartbeatRequest, version: int) -> str | None:
    """Why Kafka calls the request invalid (its GroupMetadataManager's checks), or None."""
    if not request.group_id:
        return "GroupId can't be empty."
    if version >= CLIENT_MEMBER_ID_VERSION and not request.member_id:
        return "MemberId can't be empty."
    if request.instance_id == "":
        return "InstanceId can't be empty."
    if request.rack_id == "":
        return "RackId can't be empty."
    epoch = request.member_epoch
    if epoch > 0 or epoch == LEAVE_EPOCH:
        return None if request.member_id else "MemberId can't be empty."
    if epoch == JOIN_EPOCH:
        if request.rebalance_timeout_ms == -1:
            return "RebalanceTimeoutMs must be provided in first request."
        if request.topic_partitions is None or request.topic_partitions:
            return "TopicPartitions must be empty when (re-)joining."
        regex = request.subscribed_topic_regex if version >= CLIENT_MEMBER_ID_VERSION else None
        if not request.subscribed_topic_names and not regex:
            return "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
        return None
    if epoch == STATIC_LEAVE_EPOCH:
        if not request.member_id:
            return "MemberId can't be empty."
        return None if request.instance_id is not None else "InstanceId can't be null."
    return "MemberEpoch is invalid."


def _owned(context: KafkaContext, topics: list[Any] | None) -> tuple[TopicPartition, ...] | None:
    """The partitions the member says it holds, by name (a topic id no topic has any more
    is left out: its partitions are nobody's)."""
    if topics is None:
        return None
    owned: list[TopicPartition] = []
    for topic in topics:
        name = name_of_topic_id(context, topic.topic_id)
        if name is not None:
            owned.extend(TopicPartition(name, index) for index in topic.partitions)
    return tuple(owned)


def by_topic_id(
    context: KafkaContext, partitions: tuple[TopicPartition, ...]
) -> list[tuple[uuid.UUID, str, list[int]]]:
    """(topic id, name, indexes) of ``partitions``, by topic (a topic deleted meanwhile is
    left out: the next target leaves it out too)."""
    by_name: dict[str, list[int]] = {}
    for partition in sorted(partitions):
        by_name.setdefault(partition.topic, []).append(partition.partition)
    found = []
    for name, indexes in by_name.items():
        try:
            topic_id = topic_uuid(context.broker.describe_topic(name).topic_id)
        except TwinlogError:
            continue
        found.append((topic_id, name, indexes))
    return found


def _subscription(
    context: KafkaContext, request: ConsumerGroupHeartbeatRequest, version: int
) -> tuple[tuple[str, ...] | None, str | None]:
    """The topics to give the coordinator (None: unchanged) and the member's regular
    expression. A heartbeat that leaves the expression unchanged (null) is resolved again
    with the member's own, so a topic created since is subscribed; "" clears it. Names
    given beside an expression are kept beside what it matches."""
    names = request.subscribed_topic_names
    regex = request.subscribed_topic_regex if version >= CLIENT_MEMBER_ID_VERSION else None
    if request.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
        return None, None
    stored_pattern: str | None = None
    stored_topics: tuple[str, ...] = ()
    if (regex is None or names is None) and request.member_epoch > JOIN_EPOCH:
        stored_pattern, stored_topics = _member_subscription(
            context, request.group_id, request.member_id
        )
    if regex is None:
        regex = stored_pattern
    if names is None and stored_pattern:  # its names beside the expression: those unmatched
        stored = compile_topic_regex(stored_pattern)
        names = [name for name in stored_topics if stored.fullmatch(name) is None]
    if not regex:
        return (None if names is None else tuple(names)), None
    matched = topics_matching(context, regex)
    return tuple(sorted(set(matched) | set(names or ()))), regex


def _member_subscription(
    context: KafkaContext, group_id: str, member_id: str
) -> tuple[str | None, tuple[str, ...]]:
    """The member's regular expression (None: it has none) and subscribed topics, as the
    coordinator holds them."""
    try:
        description = context.broker.describe_group(group_id)
    except TwinlogError:  # the heartbeat itself says what is wrong
        return None, ()
    for member in description.members:
        if member.member_id == member_id:
            return member.subscribed_pattern, member.subscribed_topics
    return None, ()


def _assignment(context: KafkaContext, assigned: tuple[TopicPartition, ...]) -> Any:
    topics = [
        AssignedTopic(topic_id=topic_id, partitions=indexes)
        for topic_id, _name, indexes in by_topic_id(context, assigned)
    ]
    return Assignment(topic_partitions=topics)


def handle_consumer_group_heartbeat(
    request: ConsumerGroupHeartbeatRequest, version: int, context: KafkaContext
) -> ConsumerGroupHeartbeatResponse:
    invalid = invalid_reason(request, version)
    if invalid is not None:
        return _answer(version, INVALID_REQUEST, invalid)
    guard, principal = context.guard, context.connection.principal
    denied = authorize(guard, principal, Operation.READ, (request.group_id,), Resource.GROUP)
    if denied:
        return _answer(version, denied, f"principal {principal.name!r} may not read the group")
    if request.server_assignor is not None and request.server_assignor not in SERVER_ASSIGNORS:
        return _answer(
            version,
            UNSUPPORTED_ASSIGNOR,
            f"ServerAssignor {request.server_assignor} is not supported. Supported "
            f"assignors: {', '.join(SERVER_ASSIGNORS)}.",
        )
    subscribed = request.subscribed_topic_names
    if subscribed:
        denied = authorize(guard, principal, Operation.READ, sorted(set(subscribed)))
        if denied:
            unreadable = [
                name
                for name in sorted(set(subscribed))
                if not may(guard, principal, Operation.READ, name, Resource.TOPIC)
            ]
            return _answer(
                version,
                denied,
                f"principal {principal.name!r} may not read {', '.join(unreadable)}, to which "
                "it subscribes (a 'read' grant on the topic is needed)",
            )
    try:
        topics, pattern = _subscription(context, request, version)
    except InvalidTopicRegex as error:
        # librdkafka shows the code's own text only: the operator's log says why
        log.warning("group %r, client %r: %s", request.group_id, _client_id(request), error)
        return _answer(version, INVALID_REGULAR_EXPRESSION, str(error))
    rebalance_timeout_ms = request.rebalance_timeout_ms
    call = GroupHeartbeat(
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        subscribed_topics=topics,
        subscribed_pattern=pattern,
        owned=_owned(context, request.topic_partitions),
        instance_id=request.instance_id,
        client_id=_client_id(request),
        session_timeout_ms=context.settings.group_consumer_session_timeout_ms,
        rebalance_timeout_ms=None if rebalance_timeout_ms == -1 else rebalance_timeout_ms,
        protocol=PROTOCOL_CONSUMER,
    )
    try:
        answer = context.broker.group_heartbeat(call)
    except TwinlogError as error:
        return _answer(version, code_of(error, ConsumerGroupHeartbeatRequest.API_KEY), str(error))
    if request.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
        return _answer(
            version,
            NONE,
            member_id=request.member_id,
            member_epoch=request.member_epoch,
            heartbeat_interval_ms=answer.heartbeat_interval_ms,
        )
    full = request.member_epoch == JOIN_EPOCH or (
        rebalance_timeout_ms != -1
        and subscribed is not None
        and request.topic_partitions is not None
    )
    return _answer(
        version,
        NONE,
        member_id=answer.member_id,
        member_epoch=answer.member_epoch,
        heartbeat_interval_ms=answer.heartbeat_interval_ms,
        assignment=(
            _assignment(context, answer.assigned) if full or answer.assignment_changed else None
        ),
    )
