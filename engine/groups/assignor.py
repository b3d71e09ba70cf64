"""The server-side assignor of consumer groups: uniform and sticky (KIP-848's "uniform").

Input: each member's subscribed topics, each topic's partition count, and the previous
target assignment. Output: the new target assignment, in which

- every partition of a subscribed topic goes to exactly one member subscribed to it;
- a partition stays with its previous member while that member is still subscribed to
  its topic and not above its fair share (stickiness: fewer revocations, less work lost);
- members with the same subscriptions end up with counts that differ by at most one.

The algorithm is greedy and deterministic (members by id, partitions by topic and index):
keep what may be kept, give each free partition to the least loaded eligible member, then
move partitions from the most to the least loaded eligible member while that narrows the
gap by more than one. With different subscriptions per member "balanced" means per
topic group of eligible members, as Kafka's uniform assignor; it is not an optimum.

Cost: O(partitions × members) per run; a run happens only when the group's epoch bumps.
"""

from __future__ import annotations

from collections.abc import Mapping

from twinlog.engine.base.types import TopicPartition

Assignment = dict[str, frozenset[TopicPartition]]


def assign_uniform(
    subscriptions: Mapping[str, frozenset[str]],
    partition_counts: Mapping[str, int],
    previous: Mapping[str, frozenset[TopicPartition]],
) -> Assignment:
    """The new target assignment (every member id of ``subscriptions`` is a key).

    ``partition_counts``: the topics that exist, with their partition counts; a subscribed
    topic missing from it is assigned nothing (it may be created later).
    """
    members = sorted(subscriptions)
    eligible: dict[str, list[str]] = {}
    for topic in sorted({t for topics in subscriptions.values() for t in topics}):
        if partition_counts.get(topic, 0) > 0:
            eligible[topic] = [m for m in members if topic in subscriptions[m]]
    partitions = [
        TopicPartition(topic, index)
        for topic in eligible
        for index in range(partition_counts[topic])
    ]
    quota = _fair_shares(members, eligible, partition_counts)
    owned: dict[str, set[TopicPartition]] = {m: set() for m in members}

    # 1. keep: a previous owner still subscribed keeps its partitions, up to its share
    free: list[TopicPartition] = []
    keepers = {p: m for m in members for p in sorted(previous.get(m, ()))}
    for partition in partitions:
        member = keepers.get(partition)
        if member is not None and partition.topic in subscriptions[member]:
            if len(owned[member]) < quota[member]:
                owned[member].add(partition)
                continue
        free.append(partition)

    # 2. place: each free partition to its least loaded eligible member
    for partition in free:
        member = min(eligible[partition.topic], key=lambda m: (len(owned[m]), m))
        owned[member].add(partition)

    # 3. even out: moves from the most to the least loaded eligible member (bounded: each
    #    move narrows a gap of two or more, so the sum of squares of counts falls)
    for _ in range(len(partitions)):
        if not _move_one(eligible, owned):
            break
    return {m: frozenset(owned[m]) for m in members}


def _fair_shares(
    members: list[str], eligible: Mapping[str, list[str]], partition_counts: Mapping[str, int]
) -> dict[str, int]:
    """Ceil of each member's share of the partitions it may take, splitting each topic's
    partitions evenly among its eligible members."""
    share = {m: 0.0 for m in members}
    for topic, takers in eligible.items():
        for member in takers:
            share[member] += partition_counts[topic] / len(takers)
    return {m: -int(-share[m] // 1) for m in members}


def _move_one(eligible: Mapping[str, list[str]], owned: dict[str, set[TopicPartition]]) -> bool:
    """Move one partition from a member to a less loaded eligible one, when their counts
    differ by two or more; False when no such move exists."""
    for giver in sorted(owned, key=lambda m: (-len(owned[m]), m)):
        for partition in sorted(owned[giver]):
            taker = min(eligible[partition.topic], key=lambda m: (len(owned[m]), m))
            if len(owned[giver]) - len(owned[taker]) >= 2:
                owned[giver].remove(partition)
                owned[taker].add(partition)
                return True
    return False
