"""ListGroups, DescribeGroups and DeleteGroups, onto the broker's ``list_groups``,
``describe_group`` and ``delete_group``, for Kafka's admin tools (kafka-python's and
librdkafka's admin clients, consumer group listings). Deleting a group needs DELETE on it
(as ``twinlog groups delete``); a group with members is refused NON_EMPTY_GROUP. A group is shown to a principal that may describe it (``group:`` grants with
read or describe); another is left out of a listing and answered
GROUP_AUTHORIZATION_FAILED when named.

twinlog's group states read as Kafka's classic ones: empty -> Empty, reconciling ->
PreparingRebalance, stable -> Stable, dead -> Dead; a group of KIP-848's protocol is listed
with type "consumer" and its own state names (Empty, Reconciling, Stable, Dead), and
ListGroups v5's types filter picks groups by type. A member's metadata and assignment
are encoded as the consumer protocol's subscription and assignment, from what the
coordinator knows (its subscribed topics, the partitions it holds).
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.consumer import ConsumerProtocolSubscription

from twinlog.engine.base.errors import TwinlogError
from twinlog.engine.groups.group_calls import PROTOCOL_CONSUMER
from twinlog.rpc.kafka.access import require
from twinlog.rpc.kafka.authorized_operations import authorized_operations
from twinlog.rpc.kafka.context import KafkaContext
from twinlog.rpc.kafka.error_codes import AUTHORIZATION_FAILED_CODES, NONE, code_of
from twinlog.rpc.kafka.groups import CONSUMER_PROTOCOL_TYPE, assignment_bytes
from twinlog.rpc.policy.audit import audited
from twinlog.rpc.policy.auth import Operation, Resource

KAFKA_STATE = {
    "empty": "Empty",
    "reconciling": "PreparingRebalance",
    "stable": "Stable",
    "dead": "Dead",
}
# A group of KIP-848's protocol (ConsumerGroupHeartbeat) in its own state names
CONSUMER_GROUP_STATE = {
    "empty": "Empty",
    "reconciling": "Reconciling",
    "stable": "Stable",
    "dead": "Dead",
}
SUBSCRIPTION_VERSION = 0
GROUP_DENIED = AUTHORIZATION_FAILED_CODES[Resource.GROUP.value]


def _shown(context: KafkaContext, group_id: str) -> bool:
    return context.guard.may_describe(context.connection.principal, group_id, Resource.GROUP)


def handle_list_groups(
    request: ListGroupsRequest, version: int, context: KafkaContext
) -> ListGroupsResponse:
    wanted_states = {state.lower() for state in (request.states_filter or [])}
    wanted_types = {kind.lower() for kind in (request.types_filter or [])}
    try:
        listings = context.broker.list_groups()
    except TwinlogError as error:
        return ListGroupsResponse(
            version=version,
            throttle_time_ms=0,
            error_code=code_of(error, ListGroupsRequest.API_KEY),
            groups=[],
        )
    groups = [
        ListGroupsResponse.ListedGroup(
            group_id=listing.group_id,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            group_state=_state_name(listing.state, listing.group_type),
            group_type=listing.group_type,
        )
        for listing in listings
        if _shown(context, listing.group_id)
        and (
            not wanted_states
            or _state_name(listing.state, listing.group_type).lower() in wanted_states
        )
        and (not wanted_types or listing.group_type in wanted_types)
    ]
    return ListGroupsResponse(version=version, throttle_time_ms=0, error_code=NONE, groups=groups)


def _state_name(state: str, group_type: str) -> str:
    """Kafka's name of the state: a classic group's, or a consumer group's (KIP-848)."""
    names = CONSUMER_GROUP_STATE if group_type == PROTOCOL_CONSUMER else KAFKA_STATE
    return names.get(state, state)


def _subscription_bytes(topics: tuple[str, ...]) -> bytes:
    subscription = ConsumerProtocolSubscription(
        version=SUBSCRIPTION_VERSION, topics=list(topics), user_data=None
    )
    return bytes(subscription.encode(version=SUBSCRIPTION_VERSION))


def _described(context: KafkaContext, group_id: str, operations_asked: bool = False) -> Any:
    Described = DescribeGroupsResponse.DescribedGroup
    if not _shown(context, group_id):
        return Described(
            error_code=GROUP_DENIED,
            group_id=group_id,
            group_state="",
            protocol_type="",
            protocol_data="",
            members=[],
        )
    try:
        description = context.broker.describe_group(group_id)
    except TwinlogError as error:
        return Described(
            error_code=code_of(error, DescribeGroupsRequest.API_KEY),
            error_message=str(error),
            group_id=group_id,
            group_state="Dead",
            protocol_type="",
            protocol_data="",
            members=[],
        )
    Member = Described.DescribedGroupMember
    members = [
        Member(
            member_id=member.member_id,
            group_instance_id=member.instance_id,
            client_id=member.client_id,
            client_host="",
            member_metadata=_subscription_bytes(member.subscribed_topics),
            member_assignment=assignment_bytes(member.assigned),
        )
        for member in description.members
    ]
    return Described(
        error_code=NONE,
        group_id=group_id,
        group_state=KAFKA_STATE.get(description.state, description.state),
        protocol_type=CONSUMER_PROTOCOL_TYPE,
        protocol_data="",
        members=members,
        authorized_operations=authorized_operations(
            context, Resource.GROUP, group_id, operations_asked
        ),
    )


def handle_describe_groups(
    request: DescribeGroupsRequest, version: int, context: KafkaContext
) -> DescribeGroupsResponse:
    asked = bool(getattr(request, "include_authorized_operations", False))  # v3+
    groups = [_described(context, group_id, asked) for group_id in request.groups]
    return DescribeGroupsResponse(version=version, throttle_time_ms=0, groups=groups)


def handle_delete_groups(
    request: DeleteGroupsRequest, version: int, context: KafkaContext
) -> DeleteGroupsResponse:
    principal = context.connection.principal
    results = []
    for group_id in request.groups_names:
        try:
            require(context.guard, principal, Operation.DELETE, (group_id,), Resource.GROUP)
            with audited("group.delete", principal=principal.name, group=group_id):
                context.broker.delete_group(group_id)
            error_code = NONE
        except TwinlogError as error:
            error_code = code_of(error, DeleteGroupsRequest.API_KEY)
        results.append(
            DeleteGroupsResponse.DeletableGroupResult(group_id=group_id, error_code=error_code)
        )
    return DeleteGroupsResponse(version=version, throttle_time_ms=0, results=results)
