"""The uniform sticky assignor: complete, exclusive, balanced, and sticky."""

from __future__ import annotations

import random

import pytest

from twinlog.engine.base.types import TopicPartition
from twinlog.engine.groups.assignor import assign_uniform


def _check_complete_and_exclusive(
    assignment: dict[str, frozenset[TopicPartition]],
    subscriptions: dict[str, frozenset[str]],
    counts: dict[str, int],
) -> None:
    seen: list[TopicPartition] = [p for ps in assignment.values() for p in ps]
    assert len(seen) == len(set(seen)), "a partition was given twice"
    wanted = {
        TopicPartition(t, i)
        for topics in subscriptions.values()
        for t in topics
        if t in counts
        for i in range(counts[t])
    }
    assert set(seen) == wanted
    for member, partitions in assignment.items():
        assert all(p.topic in subscriptions[member] for p in partitions)


def test_one_topic_is_split_evenly() -> None:
    subscriptions = {m: frozenset({"orders"}) for m in ("a", "b", "c")}
    assignment = assign_uniform(subscriptions, {"orders": 8}, {})
    _check_complete_and_exclusive(assignment, subscriptions, {"orders": 8})
    assert sorted(len(p) for p in assignment.values()) == [2, 3, 3]


def test_a_joining_member_takes_partitions_from_the_loaded_ones_only() -> None:
    counts = {"orders": 6}
    before = assign_uniform({m: frozenset({"orders"}) for m in "ab"}, counts, {})
    after = assign_uniform({m: frozenset({"orders"}) for m in "abc"}, counts, before)
    assert [len(after[m]) for m in "abc"] == [2, 2, 2]
    # sticky: a and b keep two of their three each, and c gets only what they gave up
    assert after["a"] <= before["a"] and after["b"] <= before["b"]


def test_a_leaving_member_s_partitions_move_and_nothing_else_does() -> None:
    counts = {"orders": 9}
    before = assign_uniform({m: frozenset({"orders"}) for m in "abc"}, counts, {})
    after = assign_uniform({m: frozenset({"orders"}) for m in "ab"}, counts, before)
    assert before["a"] <= after["a"] and before["b"] <= after["b"]
    assert after["a"] | after["b"] == before["a"] | before["b"] | before["c"]


def test_unknown_topics_and_empty_subscriptions_get_nothing() -> None:
    assignment = assign_uniform({"a": frozenset({"missing"}), "b": frozenset()}, {"orders": 2}, {})
    assert assignment == {"a": frozenset(), "b": frozenset()}


def test_a_shrunk_or_deleted_topic_s_partitions_are_not_kept() -> None:
    before = {"a": frozenset({TopicPartition("orders", 3), TopicPartition("gone", 0)})}
    assignment = assign_uniform({"a": frozenset({"orders", "gone"})}, {"orders": 2}, before)
    assert assignment["a"] == {TopicPartition("orders", 0), TopicPartition("orders", 1)}


@pytest.mark.parametrize("seed", range(30))
def test_random_groups_are_complete_exclusive_and_balanced_per_subscription(seed: int) -> None:
    rng = random.Random(seed)
    counts = {t: rng.randint(1, 7) for t in ("t1", "t2", "t3")}
    members = [f"m{i:02d}" for i in range(rng.randint(1, 9))]
    homogeneous = rng.random() < 0.5
    subscriptions = {
        m: frozenset(counts) if homogeneous else frozenset(rng.sample(sorted(counts), 2))
        for m in members
    }
    previous = assign_uniform(
        {m: subscriptions[m] for m in members[: max(1, len(members) // 2)]}, counts, {}
    )
    assignment = assign_uniform(subscriptions, counts, previous)
    _check_complete_and_exclusive(assignment, subscriptions, counts)
    if homogeneous:
        sizes = [len(p) for p in assignment.values()]
        assert max(sizes) - min(sizes) <= 1, sizes
    assert assign_uniform(subscriptions, counts, previous) == assignment  # deterministic
