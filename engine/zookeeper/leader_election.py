"""The controller's rules, as pure functions of what ZooKeeper says (no I/O here).

Replica assignment (Kafka's rack-unaware rule, simplified): the live broker ids sorted,
a start offset hashed from the topic name (so the first replicas of different topics
spread over the brokers), and partition ``p``'s replicas are the ``replication_factor``
consecutive brokers from offset ``start + p``. The first replica is the preferred leader.

Leader and ISR (Kafka's ZooKeeper-mode controller, clean election only):

- An ISR member is alive when a broker with its id is registered *with its broker epoch*;
  a member registered under an older epoch belongs to a dead incarnation (KIP-380/903).
- Dead members leave the ISR, except that the ISR never becomes empty: when every member
  is dead it keeps one (the leader if it was a member, else its first), so that clean
  election can bring the partition back when that broker returns.
- A leader that is dead (or shutting down, when another member can take over) is
  replaced by the first replica, in assignment order, that is in the ISR and alive,
  preferring brokers not shutting down; with none, the partition goes offline (leader -1).
  Never a replica outside the ISR: no unclean election.
- An offline partition whose one remaining ISR member is registered again (with a new
  broker epoch, since it restarted) gets it back as leader, with that new epoch.
- A controlled shutdown takes the broker out of every ISR it shares with a live member
  (as a leader, leadership moves first); where it is the only member it stays.
- Every leader change, going offline included, bumps ``leader_epoch`` by one.

Preferred leaders (Kafka's preferred replica election and ``auto.leader.rebalance.enable``):

- A partition's preferred leader is its first replica. It takes leadership back only
  when it is an ISR member alive under its broker epoch and not shutting down: a clean
  election (``preferred_leader_state``); the ISR stays as it is.
- Automatically (``imbalanced_partitions``): a broker is imbalanced when, of the
  partitions it is the preferred leader of, more than ``percentage`` % are led by another;
  those of its partitions it can lead move back to it, the others wait.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import replace

from twinlog.engine.zookeeper.partition_state import NO_LEADER, IsrMember, PartitionState

SETTLE_STEPS_MAX = 4  # each step removes members or elects: two suffice, more is a bug


def assign_replicas(
    topic: str, partitions: int, replication_factor: int, live_broker_ids: Sequence[int]
) -> list[tuple[int, ...]]:
    """Each partition's replicas, in assignment order (the first is the preferred leader)."""
    brokers = sorted(live_broker_ids)
    if not 1 <= replication_factor <= len(brokers):
        raise ValueError(f"replication factor {replication_factor} for {len(brokers)} live brokers")
    start = zlib.crc32(topic.encode()) % len(brokers)
    return [
        tuple(brokers[(start + partition + j) % len(brokers)] for j in range(replication_factor))
        for partition in range(partitions)
    ]


def initial_state(
    replicas: tuple[int, ...], live_epochs: Mapping[int, int], controller_epoch: int
) -> PartitionState:
    """A new partition: led by its first replica, every replica in sync at epoch 0."""
    return PartitionState(
        leader=replicas[0],
        leader_epoch=0,
        isr=tuple(IsrMember(broker_id, live_epochs[broker_id]) for broker_id in replicas),
        replicas=replicas,
        controller_epoch=controller_epoch,
    )


def next_state(
    state: PartitionState,
    live_epochs: Mapping[int, int],
    shutting_down: Set[int],
    controller_epoch: int,
) -> PartitionState | None:
    """The state the controller writes for ``state``, or None when it stays as it is.

    ``live_epochs``: broker id -> broker epoch of every registered broker.
    ``shutting_down``: the ids of live brokers that asked for a controlled shutdown.
    """

    def alive(member: IsrMember) -> bool:
        return live_epochs.get(member.broker_id) == member.broker_epoch

    if state.offline:
        return _clean_election_of_the_last_member(state, live_epochs, controller_epoch)
    survivors = [member for member in state.isr if alive(member)]
    if not survivors:
        kept = [m for m in state.isr if m.broker_id == state.leader] or list(state.isr[:1])
        return _changed(state, NO_LEADER, tuple(kept), controller_epoch)
    leader_alive = any(member.broker_id == state.leader for member in survivors)
    staying = [member for member in survivors if member.broker_id not in shutting_down]
    if staying and len(staying) < len(survivors):
        survivors = staying  # a controlled shutdown leaves every ISR it can
    leader = state.leader
    if not leader_alive or all(member.broker_id != leader for member in survivors):
        leader = _first_in_assignment_order(state.replicas, survivors, shutting_down)
    return _changed(state, leader, tuple(survivors), controller_epoch)


def settled_state(
    state: PartitionState,
    live_epochs: Mapping[int, int],
    shutting_down: Set[int],
    controller_epoch: int,
) -> PartitionState | None:
    """``next_state`` applied until nothing changes, as one write: a leader whose broker
    restarted goes offline and comes back in one step, with ``leader_epoch`` + 1 (the
    states in between are never written, so one bump tells every reader of the change)."""
    current = state
    for _step in range(SETTLE_STEPS_MAX):
        following = next_state(current, live_epochs, shutting_down, controller_epoch)
        if following is None:
            break
        current = following
    if current is state:
        return None
    if current.leader == state.leader and current.isr == state.isr:
        return None  # went offline and back to the same incarnation: nothing to write
    bump = 0 if current.leader_epoch == state.leader_epoch else 1
    return replace(current, leader_epoch=state.leader_epoch + bump)


def preferred_leader_state(
    state: PartitionState,
    live_epochs: Mapping[int, int],
    shutting_down: Set[int],
    controller_epoch: int,
) -> PartitionState | None:
    """``state`` led by its preferred leader (its first replica), ``leader_epoch`` + 1; None
    when it leads already, or cannot: not an ISR member alive under its broker epoch, or
    shutting down (a clean election only)."""
    if not state.replicas or state.replicas[0] == state.leader:
        return None
    preferred = state.replicas[0]
    member = next((m for m in state.isr if m.broker_id == preferred), None)
    if member is None or live_epochs.get(preferred) != member.broker_epoch:
        return None
    if preferred in shutting_down:
        return None
    return replace(
        state,
        leader=preferred,
        leader_epoch=state.leader_epoch + 1,
        controller_epoch=controller_epoch,
    )


def imbalanced_partitions(
    states: Iterable[tuple[str, int, PartitionState]], percentage: int
) -> set[tuple[str, int]]:
    """The partitions to lead back to their preferred leaders: those of every broker that
    leads fewer than (100 - ``percentage``) % of the partitions it is the preferred leader
    of (Kafka's ``leader.imbalance.per.broker.percentage``). Whether each may move now is
    ``preferred_leader_state``'s to say."""
    preferred_of: dict[int, int] = {}
    not_led: dict[int, list[tuple[str, int]]] = {}
    for topic, partition, state in states:
        if not state.replicas:
            continue
        preferred = state.replicas[0]
        preferred_of[preferred] = preferred_of.get(preferred, 0) + 1
        if state.leader != preferred:
            not_led.setdefault(preferred, []).append((topic, partition))
    moved: set[tuple[str, int]] = set()
    for broker_id, partitions in not_led.items():
        if len(partitions) * 100 > percentage * preferred_of[broker_id]:
            moved.update(partitions)
    return moved


def _clean_election_of_the_last_member(
    state: PartitionState, live_epochs: Mapping[int, int], controller_epoch: int
) -> PartitionState | None:
    returned = [
        IsrMember(member.broker_id, live_epochs[member.broker_id])
        for member in state.isr
        if member.broker_id in live_epochs
    ]
    if not returned:
        return None
    leader = _first_in_assignment_order(state.replicas, returned, frozenset())
    return _changed(state, leader, tuple(returned), controller_epoch)


def _first_in_assignment_order(
    replicas: tuple[int, ...], members: Sequence[IsrMember], shutting_down: Set[int]
) -> int:
    """The first replica that is a member, preferring those not shutting down."""
    ids = {member.broker_id for member in members}
    ordered = [broker_id for broker_id in replicas if broker_id in ids]
    ordered += sorted(ids - set(replicas))  # a member outside the replicas: not by our writes
    preferred = [broker_id for broker_id in ordered if broker_id not in shutting_down]
    return (preferred or ordered)[0]


def _changed(
    state: PartitionState, leader: int, isr: tuple[IsrMember, ...], controller_epoch: int
) -> PartitionState | None:
    if leader == state.leader and isr == state.isr:
        return None
    leader_epoch = state.leader_epoch + (1 if leader != state.leader else 0)
    return replace(
        state, leader=leader, leader_epoch=leader_epoch, isr=isr, controller_epoch=controller_epoch
    )
