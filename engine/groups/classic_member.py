"""What Kafka's classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) keeps
of a member between its calls: the protocol it chose, the generation its client holds (its
member epoch when it last joined), what it was given then, and its latest member epoch.

It hangs on the coordinator's own member (``Member.classic``), so it lives exactly as
long as the member does: a member that times out, leaves, is fenced or whose group moves
to another coordinator takes it along, and a restarted Kafka listener finds it again.

Thread rule: one member's calls come one at a time, from its own client; the group's
lock (``GroupMembership``) guards the attachment.
"""

from __future__ import annotations

from dataclasses import dataclass

from twinlog.engine.base.types import TopicPartition
from twinlog.engine.groups.group_calls import PROTOCOL_CLASSIC, GroupHeartbeat


@dataclass
class ClassicMember:
    group_id: str
    member_id: str
    instance_id: str | None
    client_id: str
    protocol_name: str
    subscribed_topics: tuple[str, ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    generation: int  # what the client holds (its member epoch when it joined)
    member_epoch: int  # the coordinator's latest
    given: tuple[TopicPartition, ...]

    def heartbeat(
        self, owned: tuple[TopicPartition, ...], epoch: int | None = None
    ) -> GroupHeartbeat:
        return GroupHeartbeat(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=self.member_epoch if epoch is None else epoch,
            subscribed_topics=self.subscribed_topics,
            owned=owned,
            instance_id=self.instance_id,
            client_id=self.client_id,
            session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            protocol=PROTOCOL_CLASSIC,
        )
