"""Consumer group values to and from protobuf: one encoder and one decoder each
(``engine/groups/group_calls`` on one side, ``consume.proto`` and ``admin.proto`` on the other)."""

from __future__ import annotations

from twinlog.engine.groups.group_calls import (
    OUTSIDE_ANY_GROUP,
    GroupDescription,
    GroupHeartbeat,
    GroupHeartbeatAnswer,
    GroupListing,
    GroupMemberRef,
    MemberDescription,
)
from twinlog.rpc.generated.twinlog.v1 import admin_pb2, common_pb2, consume_pb2
from twinlog.rpc.wire.convert import (
    offsets_from_proto,
    offsets_to_proto,
    topic_partitions_from_proto,
    topic_partitions_to_proto,
)


def member_to_proto(member: GroupMemberRef) -> common_pb2.GroupMember | None:
    if member == OUTSIDE_ANY_GROUP:
        return None
    return common_pb2.GroupMember(
        member_id=member.member_id,
        member_epoch=member.member_epoch,
        instance_id=member.instance_id,
    )


def member_from_proto(member: common_pb2.GroupMember | None) -> GroupMemberRef:
    """A request's ``member`` (None: the field is unset, a commit from outside the group)."""
    if member is None:
        return OUTSIDE_ANY_GROUP
    return GroupMemberRef(
        member.member_id,
        member.member_epoch,
        member.instance_id if member.HasField("instance_id") else None,
    )


def heartbeat_to_proto(call: GroupHeartbeat) -> consume_pb2.GroupHeartbeatRequest:
    return consume_pb2.GroupHeartbeatRequest(
        group_id=call.group_id,
        member_id=call.member_id,
        member_epoch=call.member_epoch,
        subscribed_topics=list(call.subscribed_topics or ()),
        subscribed_pattern=call.subscribed_pattern,
        owned=topic_partitions_to_proto(call.owned or ()),
        instance_id=call.instance_id,
        client_id=call.client_id,
        session_timeout_ms=call.session_timeout_ms,
        rebalance_timeout_ms=call.rebalance_timeout_ms,
    )


def heartbeat_from_proto(message: consume_pb2.GroupHeartbeatRequest) -> GroupHeartbeat:
    return GroupHeartbeat(
        group_id=message.group_id,
        member_id=message.member_id,
        member_epoch=message.member_epoch,
        subscribed_topics=tuple(message.subscribed_topics),
        subscribed_pattern=(
            message.subscribed_pattern if message.HasField("subscribed_pattern") else None
        ),
        owned=tuple(topic_partitions_from_proto(message.owned)),
        instance_id=message.instance_id if message.HasField("instance_id") else None,
        client_id=message.client_id,
        session_timeout_ms=message.session_timeout_ms,
        rebalance_timeout_ms=message.rebalance_timeout_ms,
    )


def answer_to_proto(answer: GroupHeartbeatAnswer) -> consume_pb2.GroupHeartbeatResponse:
    return consume_pb2.GroupHeartbeatResponse(
        member_id=answer.member_id,
        member_epoch=answer.member_epoch,
        heartbeat_interval_ms=answer.heartbeat_interval_ms,
        assigned=topic_partitions_to_proto(answer.assigned),
    )


def answer_from_proto(message: consume_pb2.GroupHeartbeatResponse) -> GroupHeartbeatAnswer:
    return GroupHeartbeatAnswer(
        member_id=message.member_id,
        member_epoch=message.member_epoch,
        heartbeat_interval_ms=message.heartbeat_interval_ms,
        assigned=tuple(topic_partitions_from_proto(message.assigned)),
    )


def listing_to_proto(listing: GroupListing) -> admin_pb2.GroupListing:
    return admin_pb2.GroupListing(
        group_id=listing.group_id, state=listing.state, member_count=listing.member_count
    )


def listing_from_proto(message: admin_pb2.GroupListing) -> GroupListing:
    return GroupListing(message.group_id, message.state, message.member_count)


def description_to_proto(description: GroupDescription) -> admin_pb2.GroupDescription:
    return admin_pb2.GroupDescription(
        group_id=description.group_id,
        state=description.state,
        group_epoch=description.group_epoch,
        members=[
            admin_pb2.GroupMemberDescription(
                member_id=m.member_id,
                instance_id=m.instance_id,
                client_id=m.client_id,
                member_epoch=m.member_epoch,
                state=m.state,
                subscribed_topics=list(m.subscribed_topics),
                subscribed_pattern=m.subscribed_pattern,
                assigned=topic_partitions_to_proto(m.assigned),
                revoking=topic_partitions_to_proto(m.revoking),
                target=topic_partitions_to_proto(m.target),
            )
            for m in description.members
        ],
        committed=offsets_to_proto(dict(description.committed)),
    )


def description_from_proto(message: admin_pb2.GroupDescription) -> GroupDescription:
    return GroupDescription(
        group_id=message.group_id,
        state=message.state,
        group_epoch=message.group_epoch,
        members=tuple(
            MemberDescription(
                member_id=m.member_id,
                instance_id=m.instance_id if m.HasField("instance_id") else None,
                client_id=m.client_id,
                member_epoch=m.member_epoch,
                state=m.state,
                subscribed_topics=tuple(m.subscribed_topics),
                subscribed_pattern=(
                    m.subscribed_pattern if m.HasField("subscribed_pattern") else None
                ),
                assigned=tuple(topic_partitions_from_proto(m.assigned)),
                revoking=tuple(topic_partitions_from_proto(m.revoking)),
                target=tuple(topic_partitions_from_proto(m.target)),
            )
            for m in message.members
        ),
        committed=tuple(sorted(offsets_from_proto(message.committed).items())),
    )
