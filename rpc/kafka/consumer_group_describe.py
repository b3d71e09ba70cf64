"""KIP-848's ConsumerGroupDescribe (key 69, v0 as Kafka 3.8.0 has it): a group of the new
protocol, its epochs and each member's assignment and target, for Kafka's admin tools
(``kafka-consumer-groups.sh --describe`` on such a group, AdminClient's
describeConsumerGroups).

DESCRIBE on the group (read implies it), else GROUP_AUTHORIZATION_FAILED, audited; a group
the coordinator does not have, or one of Kafka's classic kind, GROUP_ID_NOT_FOUND as Kafka
says it. The assignment epoch is the group epoch: twinlog computes a group's target at
every new epoch (``engine/groups``). The assignor named is the uniform one, the only one.
"""

from __future__ import annotations

from typing import Any

from twinlog.engine.base.errors import TwinlogError
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.groups.group_calls import PROTOCOL_CONSUMER
from twinlog.rpc.kafka.access import authorize
from twinlog.rpc.kafka.authorized_operations import as_int32, authorized_operations
from twinlog.rpc.kafka.consumer_group_heartbeat import by_topic_id
from twinlog.rpc.kafka.context import KafkaContext
from twinlog.rpc.kafka.error_codes import GROUP_ID_NOT_FOUND, NONE, code_of
from twinlog.rpc.kafka.group_listing import CONSUMER_GROUP_STATE
from twinlog.rpc.kafka.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
)
from twinlog.rpc.policy.auth import Operation, Resource

ASSIGNOR_NAME = "uniform"

Described = ConsumerGroupDescribeResponse.DescribedGroup
Member = Described.Member
Assignment = Member.Assignment
AssignedTopic = Assignment.TopicPartitions


def _assignment(context: KafkaContext, partitions: tuple[TopicPartition, ...]) -> Any:
    topics = [
        AssignedTopic(topic_id=topic_id, topic_name=name, partitions=indexes)
        for topic_id, name, indexes in by_topic_id(context, partitions)
    ]
    return Assignment(topic_partitions=topics)


def _refused(group_id: str, code: int, message: str) -> Any:
    return Described(
        error_code=code,
        error_message=message,
        group_id=group_id,
        group_state="",
        group_epoch=0,
        assignment_epoch=0,
        assignor_name="",
        members=[],
    )


def _described(context: KafkaContext, group_id: str, operations_asked: bool = False) -> Any:
    guard, principal = context.guard, context.connection.principal
    if not guard.may_describe(principal, group_id, Resource.GROUP):
        denied = authorize(guard, principal, Operation.DESCRIBE, (group_id,), Resource.GROUP)
        return _refused(group_id, denied, f"principal {principal.name!r} may not describe it")
    try:
        description = context.broker.describe_group(group_id)
    except TwinlogError as error:
        return _refused(group_id, code_of(error, ConsumerGroupDescribeRequest.API_KEY), str(error))
    if description.group_type != PROTOCOL_CONSUMER:
        return _refused(group_id, GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
    members = [
        Member(
            member_id=member.member_id,
            instance_id=member.instance_id,
            rack_id=None,
            member_epoch=member.member_epoch,
            client_id=member.client_id,
            client_host="",
            subscribed_topic_names=list(member.subscribed_topics),
            subscribed_topic_regex=member.subscribed_pattern,
            assignment=_assignment(context, member.assigned),
            target_assignment=_assignment(context, member.target),
        )
        for member in description.members
    ]
    return Described(
        error_code=NONE,
        error_message=None,
        group_id=group_id,
        group_state=CONSUMER_GROUP_STATE.get(description.state, description.state),
        group_epoch=description.group_epoch,
        assignment_epoch=description.group_epoch,
        assignor_name=ASSIGNOR_NAME,
        members=members,
        authorized_operations=as_int32(
            authorized_operations(context, Resource.GROUP, group_id, operations_asked)
        ),
    )


def handle_consumer_group_describe(
    request: ConsumerGroupDescribeRequest, version: int, context: KafkaContext
) -> ConsumerGroupDescribeResponse:
    asked = bool(getattr(request, "include_authorized_operations", False))
    groups = [_described(context, group_id, asked) for group_id in request.group_ids]
    return ConsumerGroupDescribeResponse(version=version, throttle_time_ms=0, groups=groups)
