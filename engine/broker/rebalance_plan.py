"""A plan that spreads replicas and preferred leaders evenly over brokers, as a pure
function of where the partitions are (``twinlog cluster rebalance`` and ``decommission``;
Kafka's ``kafka-reassign-partitions.sh --generate``, which leaves the balance to you).

The rules, in order:

1. Replicas on a broker that is leaving (a decommission) or not registered move; a
   partition keeps its replication factor when enough brokers remain, and otherwise gets
   one replica per broker left, refused (``InvalidReplicaAssignmentError``) where that
   lowers it below its topic's ``min.insync.replicas``: no write could then be
   acknowledged. (A partition created below it already is left as it is.)
2. Each replica to place goes to the broker holding the fewest replicas (lowest id on a
   tie) that the partition is not on yet.
3. While one broker holds two or more replicas of a topic more than another, one of
   them (of a partition the lighter broker is not on) moves to it, in the same position
   of the list, so a preferred leader stays preferred; then the same over the brokers'
   totals, moving only replicas whose topic stays spread. A new broker gets its share
   of every topic this way.
4. While one broker is the preferred leader (first replica) of two or more partitions
   more than another that is a replica of one of them, the two swap places in that
   partition's list: a new order only, which copies nothing.

Moves change as few replicas as those rules need; partitions already balanced stay.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Set
from dataclasses import dataclass

from twinlog.engine.base.errors import InvalidReplicaAssignmentError

# Each balancing step moves one replica: a bound on the steps, far above any real need,
# so a bug cannot loop forever.
STEPS_MAX = 1_000_000


@dataclass(frozen=True)
class PlacedPartition:
    topic: str
    partition: int
    replicas: tuple[int, ...]  # in assignment order: the first is the preferred leader
    min_insync_replicas: int = 1


@dataclass(frozen=True)
class PlannedMove:
    topic: str
    partition: int
    replicas: tuple[int, ...]  # now
    target: tuple[int, ...]  # after the move

    @property
    def copies(self) -> bool:
        """Whether a broker gets a replica it does not hold (else a new order only)."""
        return bool(set(self.target) - set(self.replicas))


@dataclass(frozen=True)
class RebalancePlan:
    moves: tuple[PlannedMove, ...]
    replicas_before: Mapping[int, int]  # broker id -> replicas it holds
    replicas_after: Mapping[int, int]
    leaders_before: Mapping[int, int]  # broker id -> partitions it is the preferred leader of
    leaders_after: Mapping[int, int]


def plan_rebalance(
    partitions: Iterable[PlacedPartition], brokers: Iterable[int], leaving: Set[int] = frozenset()
) -> RebalancePlan:
    """The moves that balance ``partitions`` over ``brokers`` (the registered ones) minus
    ``leaving``. InvalidReplicaAssignmentError when no broker would be left, or a
    partition would keep fewer replicas than its ``min.insync.replicas``."""
    placed = sorted(partitions, key=lambda p: (p.topic, p.partition))
    registered = set(brokers)
    eligible = sorted(registered - set(leaving))
    if not eligible:
        raise InvalidReplicaAssignmentError(
            f"no broker would be left of {sorted(registered)} without {sorted(leaving)}"
        )
    targets: dict[tuple[str, int], list[int]] = {}
    for p in placed:
        factor = min(len(p.replicas), len(eligible))
        if factor < len(p.replicas) and factor < p.min_insync_replicas:
            raise InvalidReplicaAssignmentError(
                f"{p.topic}-{p.partition} has {len(p.replicas)} replicas and "
                f"min.insync.replicas {p.min_insync_replicas}, but {len(eligible)} broker(s) "
                f"would be left ({eligible}): no write to it could be acknowledged. Add "
                "brokers first, or lower its min.insync.replicas"
            )
        targets[(p.topic, p.partition)] = [r for r in p.replicas if r in eligible][:factor]
    load = Counter({broker_id: 0 for broker_id in eligible})
    for target in targets.values():
        load.update(target)
    for p in placed:  # rule 2
        target = targets[(p.topic, p.partition)]
        factor = min(len(p.replicas), len(eligible))
        while len(target) < factor:
            chosen = min((b for b in eligible if b not in target), key=lambda b: (load[b], b))
            target.append(chosen)
            load[chosen] += 1
    _balance_replicas(targets, load, eligible)
    _balance_leaders(targets, eligible)
    moves = tuple(
        PlannedMove(p.topic, p.partition, p.replicas, tuple(targets[(p.topic, p.partition)]))
        for p in placed
        if tuple(targets[(p.topic, p.partition)]) != p.replicas
    )
    return RebalancePlan(
        moves,
        _counts((p.replicas for p in placed), registered),
        _counts(targets.values(), registered),
        _counts(((p.replicas[0],) for p in placed if p.replicas), registered),
        _counts(((t[0],) for t in targets.values() if t), registered),
    )


def _balance_replicas(
    targets: dict[tuple[str, int], list[int]], load: Counter[int], eligible: list[int]
) -> None:
    """Rule 3: each topic spread on its own first (a new broker gets a share of every
    topic, not only of the internal ones), then the brokers' totals, moving only a
    replica whose topic stays spread."""
    topic_load: dict[str, Counter[int]] = {}
    for (topic, _partition), target in targets.items():
        topic_load.setdefault(topic, Counter({b: 0 for b in eligible})).update(target)

    def move(key: tuple[str, int], heavy: int, light: int) -> None:
        target = targets[key]
        target[target.index(heavy)] = light
        for counts in (load, topic_load[key[0]]):
            counts[heavy] -= 1
            counts[light] += 1

    for topic, counts in topic_load.items():
        keys = sorted(key for key in targets if key[0] == topic)
        _spread(keys, targets, counts, load, eligible, lambda key, heavy, light: True, move)
    _spread(
        sorted(targets), targets, load, load, eligible,
        lambda key, heavy, light: topic_load[key[0]][heavy] > topic_load[key[0]][light],
        move,
    )  # fmt: skip


def _spread(
    keys: list[tuple[str, int]],
    targets: dict[tuple[str, int], list[int]],
    counts: Counter[int],
    load: Counter[int],
    eligible: list[int],
    allowed: Callable[[tuple[str, int], int, int], bool],
    move: Callable[[tuple[str, int], int, int], None],
) -> None:
    """While a broker holds two or more of ``counts`` more than another, move one replica
    of ``keys`` (one the lighter broker is not on, and ``allowed``) to it; ties go by the
    brokers' total ``load``."""
    for _step in range(STEPS_MAX):
        heavy = max(eligible, key=lambda b: (counts[b], load[b], -b))
        moved = False
        for light in sorted(eligible, key=lambda b: (counts[b], load[b], b)):
            if counts[heavy] - counts[light] < 2:
                break
            for key in keys:
                target = targets[key]
                if heavy in target and light not in target and allowed(key, heavy, light):
                    move(key, heavy, light)
                    moved = True
                    break
            if moved:
                break
        if not moved:
            return
    raise AssertionError("the replica balance did not settle")


def _balance_leaders(targets: dict[tuple[str, int], list[int]], eligible: list[int]) -> None:
    """Rule 4."""
    leads = Counter({broker_id: 0 for broker_id in eligible})
    leads.update(target[0] for target in targets.values() if target)
    for _step in range(STEPS_MAX):
        heavy = max(eligible, key=lambda b: (leads[b], -b))
        swapped = False
        for light in sorted(eligible, key=lambda b: (leads[b], b)):
            if leads[heavy] - leads[light] < 2:
                break
            for key in sorted(targets):
                target = targets[key]
                if target and target[0] == heavy and light in target:
                    where = target.index(light)
                    target[0], target[where] = light, heavy
                    leads[heavy] -= 1
                    leads[light] += 1
                    swapped = True
                    break
            if swapped:
                break
        if not swapped:
            return
    raise AssertionError("the leader balance did not settle")


def _counts(lists: Iterable[Iterable[int]], brokers: Set[int]) -> dict[int, int]:
    counts = Counter({broker_id: 0 for broker_id in brokers})
    for replicas in lists:
        counts.update(replicas)
    return dict(sorted(counts.items()))
