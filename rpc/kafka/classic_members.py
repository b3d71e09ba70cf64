"""The members of classic groups (JoinGroup ... LeaveGroup) between their calls: each one's
subscription, its generation and what it was given (``groups``).

The table lives in the listener's process: a restarted listener answers its members
UNKNOWN_MEMBER_ID and they join again. Entries of members that stopped calling are
dropped after twice their session timeout; at ``MEMBERS_MAX`` a new member is refused
(retriable) until some leave.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from twinlog.engine.base.types import TopicPartition
from twinlog.engine.groups.group_calls import GroupHeartbeat

MEMBERS_MAX = 10_000


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
    last_call_s: float

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
        )


class ClassicMembers:
    """Thread rule: any thread; ``_lock`` guards the table (coordinator calls are made
    outside it: one member's calls come one at a time, from its own client)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._members: dict[tuple[str, str], ClassicMember] = {}

    def get(self, group_id: str, member_id: str) -> ClassicMember | None:
        with self._lock:
            member = self._members.get((group_id, member_id))
            if member is not None:
                member.last_call_s = time.monotonic()
            return member

    def put(self, member: ClassicMember) -> None:
        with self._lock:
            self._drop_silent()
            self._members[(member.group_id, member.member_id)] = member

    def remove(self, group_id: str, member_id: str) -> None:
        with self._lock:
            self._members.pop((group_id, member_id), None)

    def full(self) -> bool:
        with self._lock:
            return len(self._members) >= MEMBERS_MAX

    def _drop_silent(self) -> None:
        now_s = time.monotonic()
        silent = [
            key
            for key, member in self._members.items()
            if now_s - member.last_call_s > 2 * member.session_timeout_ms / 1000
        ]
        for key in silent:
            del self._members[key]
