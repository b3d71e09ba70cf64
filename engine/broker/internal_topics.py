"""The topics a broker keeps for itself, and which coordinator partition owns what.

    __consumer_offsets   group offsets (``group_offsets``): in a cluster replicated like any
                         topic, and partition P's leader is the coordinator of the groups
                         that hash to P (``group_coordinators``)
    __txn_journal        the transaction journal: partition N is the journal of
                         coordinator N, replicated like any partition, and its leader is
                         coordinator N (CLUSTER.md §3.5); on one node, too (a cluster of
                         one; ``txn_journal_migration`` moved the old ``txn/N``)

The one rule (``is_internal``): a topic whose name starts with ``__`` is the broker's.
No client creates, deletes or produces to one; ``list_topics`` leaves them out; an ACL
glob reaches one only when the pattern itself starts with ``__`` (``read *`` does not:
``__consumer_offsets`` holds every group's offsets). The broker creates its own
(``topic_manager``) and writes them through their partitions, never through the client
calls. A cluster's Metadata and FindCoordinator name their leaders.
"""

from __future__ import annotations

from twinlog.engine.base.crc32c import crc32c
from twinlog.engine.base.errors import InvalidConfigError
from twinlog.engine.base.units import MEBIBYTE
from twinlog.engine.broker.group_offsets import OFFSETS_TOPIC

TXN_JOURNAL_TOPIC = "__txn_journal"
INTERNAL_TOPIC_PREFIX = "__"  # every name the broker keeps for itself starts with it
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TXN_JOURNAL_TOPIC})  # the ones it creates
assert all(name.startswith(INTERNAL_TOPIC_PREFIX) for name in INTERNAL_TOPICS)

# What a client does instead of writing an internal topic itself.
_INSTEAD = {
    OFFSETS_TOPIC: "commit offsets instead",
    TXN_JOURNAL_TOPIC: "the coordinators write it",
}


def is_internal(topic: str) -> bool:
    """The one rule: a name starting with ``__`` is the broker's own topic."""
    return topic.startswith(INTERNAL_TOPIC_PREFIX)


def refuse_internal(topic: str, action: str) -> None:
    """InvalidConfigError if ``topic`` is internal: no client may ``action`` it."""
    if is_internal(topic):
        instead = _INSTEAD.get(topic, f"names starting {INTERNAL_TOPIC_PREFIX!r} are reserved")
        raise InvalidConfigError(
            f"{topic} is internal: a client may not {action} it ({instead}); "
            f"choose a name that does not start with {INTERNAL_TOPIC_PREFIX!r}"
        )


def coordinator_partition_of_transactional_id(
    transactional_id: str, journal_partitions: int
) -> int:
    """The journal partition (= coordinator) that owns ``transactional_id``: Kafka's
    hash-mod rule, with CRC-32C so every client and broker computes the same."""
    if journal_partitions < 1:
        raise ValueError(f"journal_partitions is {journal_partitions}, expected 1 or more")
    return crc32c(transactional_id.encode("utf-8")) % journal_partitions


# __txn_journal's partitions hold one small batch per coordinator decision, each fsynced
# before the coordinator acts; the coordinator's checkpoints free the segments (retention
# by time or size would drop records replay still needs).
TXN_JOURNAL_TOPIC_CONFIG = {
    "segment_bytes": str(64 * MEBIBYTE),
    "retention_ms": "-1",
    "retention_bytes": "-1",
    "flush_policy": "every_append",
}
