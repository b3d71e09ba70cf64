"""Partition reassignments asked for by an operator (Kafka's AlterPartitionReassignments).

    /admin/reassign_partitions
        {"partitions": [{"topic": t, "partition": p, "replicas": [broker ids]}, ...],
         "throttle_bytes_per_s": int}        replicas [] cancels; throttle 0: none

Any broker may ask (``twinlog partitions reassign``, ``Admin.reassign_partitions``, a
Kafka client): it checks each move against ZooKeeper (the partition exists, its target
brokers are registered, a cancel names a running reassignment), creates the znode with
the moves that passed, and waits, bounded, until the controller deletes it in the multi
that starts them (``Controller``, ``admin_request``). The copy runs on from there;
``running_reassignments`` reads what runs from the partition states.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence, Set

from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import WatchedEvent

from twinlog.engine.base.errors import (
    CorruptJournalError,
    NoReassignmentInProgressError,
    RequestTimedOutError,
    TwinlogError,
    UnknownTopicOrPartitionError,
)
from twinlog.engine.broker.reassignments import (
    MoveResult,
    PartitionMove,
    Reassignment,
    check_move,
)
from twinlog.engine.zookeeper import znodes
from twinlog.engine.zookeeper.admin_request import create_when_free, read_request, wait_gone
from twinlog.engine.zookeeper.broker_registration import live_brokers
from twinlog.engine.zookeeper.partition_state import (
    PartitionState,
    read_partition_state,
    read_topic_partition_states,
)
from twinlog.engine.zookeeper.session import ZooKeeperSession


def encode_request(moves: Sequence[PartitionMove], throttle_bytes_per_s: int) -> bytes:
    return znodes.encode(
        {
            "partitions": [
                {"topic": m.topic, "partition": m.partition, "replicas": list(m.replicas)}
                for m in moves
            ],
            "throttle_bytes_per_s": throttle_bytes_per_s,
        }
    )


def decode_request(data: bytes) -> tuple[dict[tuple[str, int], tuple[int, ...]], int]:
    """{(topic, partition): target replicas (empty: cancel)} and the throttle."""
    path = znodes.REASSIGN_PARTITIONS
    value = znodes.decode(path, data, ("partitions",))
    try:
        moves = {
            (str(entry["topic"]), int(entry["partition"])): tuple(int(r) for r in entry["replicas"])
            for entry in value["partitions"]
        }
        return moves, int(value.get("throttle_bytes_per_s", 0))
    except (TypeError, ValueError, KeyError) as error:
        raise CorruptJournalError(
            f"ZooKeeper znode {path} does not hold partition moves ({error!r}): {data[:200]!r}"
        ) from None


def read_reassignment_request(
    session: ZooKeeperSession, watch: Callable[[WatchedEvent], None] | None = None
) -> tuple[dict[tuple[str, int], tuple[int, ...]], int, int] | None:
    """The moves asked, the throttle and the znode's version (for its delete), or None
    when none is asked. ``watch`` is set on the znode whether or not it exists."""
    found = read_request(session, znodes.REASSIGN_PARTITIONS, watch)
    if found is None:
        return None
    moves, throttle_bytes_per_s = decode_request(found[0])
    return moves, throttle_bytes_per_s, found[1]


def request_reassignment(
    session: ZooKeeperSession,
    moves: Sequence[PartitionMove],
    throttle_bytes_per_s: int,
    timeout_ms: int,
) -> list[MoveResult]:
    """Check ``moves``, ask the controller to start those that pass, and wait at most
    ``timeout_ms`` for it to take them; one result per move, in order."""
    live = set(live_brokers(session))
    checked: list[tuple[PartitionMove, TwinlogError | None]] = []
    for move in moves:
        checked.append((move, _refusal(session, move, live)))
    asked = [move for move, error in checked if error is None]
    taken = True
    if asked:
        deadline_s = time.monotonic() + timeout_ms / 1000
        path = znodes.REASSIGN_PARTITIONS
        data = encode_request(asked, throttle_bytes_per_s)
        taken = create_when_free(session, path, data, deadline_s)
        taken = taken and wait_gone(session, path, deadline_s)
    results = []
    for move, error in checked:
        if error is None and not taken:
            error = RequestTimedOutError(
                f"{move.topic}-{move.partition}: no controller took the reassignment within "
                f"{timeout_ms} ms; the request stays in ZooKeeper and the next controller "
                "takes it (see twinlog partitions reassignments)"
            )
        results.append(MoveResult(move.topic, move.partition, error))
    return results


def _refusal(session: ZooKeeperSession, move: PartitionMove, live: Set[int]) -> TwinlogError | None:
    state = read_partition_state(session, move.topic, move.partition)
    where = f"{move.topic}-{move.partition}"
    if state is None:
        return UnknownTopicOrPartitionError(f"{where}: no such partition in the cluster")
    if move.cancel:
        if not state.reassigning:
            return NoReassignmentInProgressError(f"{where}: no reassignment runs to cancel")
        return None
    try:
        check_move(move, live)
    except TwinlogError as error:
        return error
    return None


def running_reassignments(session: ZooKeeperSession) -> list[Reassignment]:
    """Every reassignment that runs, by topic and partition (progress is the leaders' to
    add)."""
    try:
        topics = session.wait(session.client.get_children_async(znodes.TOPICS))
    except NoNodeError:
        return []
    running = []
    for topic in sorted(topics):
        for partition, state in sorted(read_topic_partition_states(session, topic).items()):
            if state.reassigning:
                running.append(reassignment_of(topic, partition, state))
    return running


def reassignment_of(topic: str, partition: int, state: PartitionState) -> Reassignment:
    return Reassignment(
        topic,
        partition,
        state.replicas,
        state.adding,
        state.removing,
        state.original,
        state.leader,
        state.throttle_bytes_per_s,
    )
