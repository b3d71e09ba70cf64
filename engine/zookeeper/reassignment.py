"""The controller's rules for moving a partition's replicas, as pure functions (no I/O).

Kafka's KIP-455, on the partition state (``partition_state``):

    asked            the controller writes replicas = target + (original - target),
                     adding = target - original, removing = original - target, the
                     original replicas in their order, and leader_epoch + 1 (so the leader tracks the new replicas and the new
                     brokers start to follow); the ISR stays as it is
    catching up      new replicas copy the leader's logs; the leader adds each to the
                     ISR once it caught up (its own ISR write, as for any follower)
    complete         once every target replica is in the ISR and alive: replicas =
                     target, ISR = ISR & target, the leader kept if it is a target
                     replica, else the first target replica in the ISR (not shutting
                     down, if one can); leader_epoch + 1. Brokers no longer replicas
                     drop their copy.
    cancelled        replicas = original, ISR = ISR & original, the leader as above
                     from the original replicas; leader_epoch + 1. Refused (the
                     reassignment goes on) while no original replica is in the ISR.

A new target while one runs starts again from the same original replicas. The one
transition function is ``reassignment_step``; ``start_state`` and ``cancel_state`` are
its two answers to an operator's request.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import replace

from twinlog.engine.zookeeper.partition_state import PartitionState

CANCEL: tuple[int, ...] = ()  # the request's target that asks to cancel


def start_state(
    state: PartitionState,
    target: Sequence[int],
    throttle_bytes_per_s: int,
    controller_epoch: int,
) -> PartitionState | None:
    """``state`` moving to ``target`` (None when it is there already and nothing runs)."""
    target = tuple(target)
    if not target or len(set(target)) != len(target):
        raise ValueError(f"target replicas {list(target)} must be distinct and not empty")
    original = state.original
    if target == original and not state.reassigning:
        return None
    replicas = target + tuple(r for r in original if r not in target)
    adding = tuple(r for r in target if r not in original)
    removing = tuple(r for r in original if r not in target)
    if not adding and not removing:  # a new order only: a reassignment with nothing to copy
        return _completed(state, replicas, controller_epoch, frozenset())
    return replace(
        state,
        replicas=replicas,
        adding=adding,
        removing=removing,
        original_order=original,
        throttle_bytes_per_s=throttle_bytes_per_s,
        leader_epoch=state.leader_epoch + 1,
        controller_epoch=controller_epoch,
    )


def cancel_state(
    state: PartitionState, shutting_down: Set[int], controller_epoch: int
) -> PartitionState | None:
    """``state`` back on its original replicas; None when nothing runs, or when no
    original replica is in the ISR (cancelling then would leave it without one)."""
    if not state.reassigning:
        return None
    return _completed(state, state.original, controller_epoch, shutting_down)


def reassignment_step(
    state: PartitionState,
    live_epochs: Mapping[int, int],
    shutting_down: Set[int],
    controller_epoch: int,
) -> PartitionState | None:
    """The completed state once every target replica is in the ISR, alive under the
    broker epoch it is a member with; None while it catches up (or nothing runs)."""
    if not state.reassigning or state.offline:
        return None
    members = {member.broker_id: member.broker_epoch for member in state.isr}
    for broker_id in state.target:
        if broker_id not in members or live_epochs.get(broker_id) != members[broker_id]:
            return None
    return _completed(state, state.target, controller_epoch, shutting_down)


def _completed(
    state: PartitionState,
    replicas: tuple[int, ...],
    controller_epoch: int,
    shutting_down: Set[int],
) -> PartitionState | None:
    isr = tuple(member for member in state.isr if member.broker_id in replicas)
    if not isr:
        return None
    in_sync = [member.broker_id for member in isr]
    if state.leader in in_sync and state.leader not in shutting_down:
        leader = state.leader
    else:
        ordered = [r for r in replicas if r in in_sync]
        leader = ([r for r in ordered if r not in shutting_down] or ordered)[0]
    return replace(
        state,
        leader=leader,
        leader_epoch=state.leader_epoch + 1,
        isr=isr,
        replicas=replicas,
        adding=(),
        removing=(),
        original_order=(),
        throttle_bytes_per_s=0,
        controller_epoch=controller_epoch,
    )


def progress_text(state: PartitionState) -> str:
    """``[1, 2, 3] -> [2, 3, 4] (adding [4], removing [1])``, for logs."""
    return (
        f"{list(state.original)} -> {list(state.target)} (adding {list(state.adding)}, "
        f"removing {list(state.removing)})"
    )
