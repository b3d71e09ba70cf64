"""Which partitions an election of "every partition" asks for, at either door (the gRPC
``ElectLeaders`` call and Kafka's ElectLeaders with no partition named).

Without an ACL file: every partition of every topic, the internal ones included (None:
the broker expands it). With one: every partition of the topics the caller may alter, an
internal topic only where a grant names it (as for every other operation); a caller who
may alter none is refused (AuthorizationError, audited).
"""

from __future__ import annotations

from twinlog.engine.base.errors import UnknownTopicOrPartitionError
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.internal_topics import INTERNAL_TOPICS
from twinlog.rpc.policy.auth import Guard, Operation, Principal
from twinlog.rpc.wire.broker_api import BrokerApi


def alterable_partitions(
    guard: Guard, principal: Principal, broker: BrokerApi
) -> list[TopicPartition] | None:
    if guard.acl is None:
        return None
    candidates = [*broker.list_topics(), *sorted(INTERNAL_TOPICS)]  # list_topics: no internal
    topics = [name for name in candidates if guard.acl.allows(principal, Operation.ALTER, name)]
    if not topics:
        guard.require(principal, Operation.ALTER, ["*"])  # refused, and audited
    partitions: list[TopicPartition] = []
    for topic in topics:
        try:
            count = len(broker.describe_topic(topic).partitions)
        except UnknownTopicOrPartitionError:
            continue  # deleted since the listing, or an internal topic not created yet
        partitions += [TopicPartition(topic, index) for index in range(count)]
    return partitions
