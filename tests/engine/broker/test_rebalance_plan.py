"""The rebalance plan as a pure function: a new broker gets its share, a leaving broker
is emptied, preferred leaders spread, a balanced cluster stays, and a plan below
min.insync.replicas is refused."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twinlog.engine.base.errors import InvalidReplicaAssignmentError
from twinlog.engine.broker.rebalance_plan import PlacedPartition, plan_rebalance


def placed(*replica_lists: tuple[int, ...], min_isr: int = 1) -> list[PlacedPartition]:
    return [PlacedPartition("t", i, r, min_isr) for i, r in enumerate(replica_lists)]


def test_a_new_broker_gets_its_share_and_the_others_keep_theirs() -> None:
    # 6 partitions of factor 2 on brokers 1-3 (4 replicas each); broker 4 just joined.
    before = placed((1, 2), (2, 3), (3, 1), (1, 2), (2, 3), (3, 1))
    plan = plan_rebalance(before, [1, 2, 3, 4])
    assert plan.replicas_before == {1: 4, 2: 4, 3: 4, 4: 0}
    assert plan.replicas_after == {1: 3, 2: 3, 3: 3, 4: 3}
    assert all(count in (1, 2) for count in plan.leaders_after.values())
    assert sum(move.copies for move in plan.moves) == 3  # one replica per move, three moves
    for move in plan.moves:
        assert len(move.target) == 2 and len(set(move.target)) == 2
        assert len(set(move.target) - set(move.replicas)) <= 1


def test_a_leaving_broker_is_emptied_and_the_factor_kept_where_brokers_remain() -> None:
    before = placed((1, 2, 3), (2, 3, 4), (3, 4, 1), (4, 1, 2))
    plan = plan_rebalance(before, [1, 2, 3, 4], leaving={4})
    assert plan.replicas_after[4] == 0 and plan.leaders_after[4] == 0
    targets = {m.partition: m.target for m in plan.moves}
    for p in before:
        target = targets.get(p.partition, p.replicas)
        assert len(target) == 3 and 4 not in target


def test_too_few_brokers_left_lower_the_factor_down_to_min_insync_replicas_only() -> None:
    three = placed((1, 2, 3), (2, 3, 1), min_isr=2)
    plan = plan_rebalance(three, [1, 2, 3], leaving={3})
    assert all(len(m.target) == 2 and 3 not in m.target for m in plan.moves)
    with pytest.raises(InvalidReplicaAssignmentError, match=r"min\.insync\.replicas 3"):
        plan_rebalance(placed((1, 2, 3), min_isr=3), [1, 2, 3], leaving={3})
    below_already = plan_rebalance(placed((1,), (1,), min_isr=2), [1, 2])  # made that way
    assert [m.target for m in below_already.moves] == [(2,)]
    with pytest.raises(InvalidReplicaAssignmentError, match="no broker would be left"):
        plan_rebalance(placed((1,)), [1], leaving={1})


def test_a_balanced_cluster_is_left_as_it_is() -> None:
    plan = plan_rebalance(placed((1, 2), (2, 3), (3, 1)), [1, 2, 3])
    assert plan.moves == ()


def test_preferred_leaders_spread_by_a_new_order_only() -> None:
    plan = plan_rebalance(placed((1, 2), (1, 2), (1, 2), (1, 2)), [1, 2])
    assert plan.leaders_after == {1: 2, 2: 2}
    assert all(not move.copies for move in plan.moves)


def test_replicas_of_brokers_no_longer_registered_move() -> None:
    plan = plan_rebalance(placed((1, 9), (2, 9)), [1, 2, 3])
    assert all(9 not in m.target for m in plan.moves) and len(plan.moves) == 2


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 6).flatmap(
        lambda brokers: st.tuples(
            st.just(brokers),
            st.lists(
                st.integers(1, brokers).flatmap(
                    lambda factor: st.permutations(range(1, brokers + 1)).map(
                        lambda order: tuple(order[:factor])
                    )
                ),
                max_size=30,
            ),
            st.integers(0, 2),  # brokers added after the topics were placed
        )
    )
)
def test_any_plan_is_balanced_and_valid(case: tuple[int, list[tuple[int, ...]], int]) -> None:
    brokers, replica_lists, added = case
    registered = list(range(1, brokers + added + 1))
    plan = plan_rebalance(placed(*replica_lists), registered)
    targets = {m.partition: m.target for m in plan.moves}
    final = [targets.get(index, replicas) for index, replicas in enumerate(replica_lists)]
    for replicas, target in zip(replica_lists, final, strict=True):
        assert len(target) == len(replicas) and len(set(target)) == len(target)
        assert set(target) <= set(registered)
    load = plan.replicas_after
    assert sum(load.values()) == sum(len(r) for r in replica_lists)
    # Spread as far as moves can go: no broker two or more replicas heavier than another
    # holds a partition the lighter one could take.
    for heavy in registered:
        for light in registered:
            if load[heavy] - load[light] >= 2:
                assert not any(heavy in t and light not in t for t in final), (heavy, light)


def test_a_new_broker_gets_a_share_of_every_topic_not_only_the_small_ones() -> None:
    data = [PlacedPartition("data", i, r) for i, r in enumerate([(1, 2), (2, 3), (3, 1)] * 2)]
    internal = [PlacedPartition("__internal", i, (1, 2, 3)) for i in range(4)]
    plan = plan_rebalance(data + internal, [1, 2, 3, 4])
    targets = {(m.topic, m.partition): m.target for m in plan.moves}
    data_on_4 = sum(4 in targets.get((p.topic, p.partition), p.replicas) for p in data)
    assert data_on_4 == 3  # 12 data replicas over 4 brokers


@settings(max_examples=150, deadline=None)
@given(
    st.integers(2, 5).flatmap(
        lambda brokers: st.tuples(
            st.just(brokers),
            st.lists(
                st.tuples(
                    st.sampled_from(["a", "b", "c"]),
                    st.integers(1, brokers).flatmap(
                        lambda factor: st.permutations(range(1, brokers + 1)).map(
                            lambda order: tuple(order[:factor])
                        )
                    ),
                ),
                max_size=30,
            ),
        )
    )
)
def test_every_topic_is_spread_and_then_the_totals(
    case: tuple[int, list[tuple[str, tuple[int, ...]]]],
) -> None:
    brokers, items = case
    registered = list(range(1, brokers + 2))  # one broker more than the data was placed on
    before = [PlacedPartition(topic, i, replicas) for i, (topic, replicas) in enumerate(items)]
    plan = plan_rebalance(before, registered)
    targets = {(m.topic, m.partition): m.target for m in plan.moves}
    final = [(p.topic, targets.get((p.topic, p.partition), p.replicas)) for p in before]
    per_topic: dict[str, dict[int, int]] = {}
    for topic, target in final:
        counts = per_topic.setdefault(topic, dict.fromkeys(registered, 0))
        for broker_id in target:
            counts[broker_id] += 1
    for topic, counts in per_topic.items():
        for heavy in registered:
            for light in registered:
                if counts[heavy] - counts[light] >= 2:
                    assert not any(
                        t == topic and heavy in r and light not in r for t, r in final
                    ), (topic, heavy, light)
    load = plan.replicas_after
    for heavy in registered:
        for light in registered:
            if load[heavy] - load[light] >= 2:
                assert not any(
                    heavy in r and light not in r and per_topic[t][heavy] > per_topic[t][light]
                    for t, r in final
                ), (heavy, light)
