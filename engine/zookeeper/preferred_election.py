"""Preferred leader elections asked for by an operator (Kafka's ElectLeaders, PREFERRED).

    /admin/preferred_replica_election    {"partitions": [[topic, partition], ...]}

Any broker may ask, for ``twinlog cluster elect-leaders --preferred`` or a Kafka client's
ElectLeaders: it creates the znode, waits until the controller deletes it (in the multi
that writes the elections: ``Controller``), then reads what each partition's state says.
One request at a time (``admin_request``).

The rule of who may lead is ``leader_election.preferred_leader_state``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from kazoo.protocol.states import WatchedEvent

from twinlog.engine.base.errors import CorruptJournalError
from twinlog.engine.broker.leader_elections import ElectionOutcome, ElectionResult
from twinlog.engine.zookeeper import znodes
from twinlog.engine.zookeeper.admin_request import create_when_free, read_request, wait_gone
from twinlog.engine.zookeeper.partition_state import (
    PartitionState,
    read_partition_state,
    read_topic_partition_states,
)
from twinlog.engine.zookeeper.session import ZooKeeperSession


def encode_request(partitions: Sequence[tuple[str, int]]) -> bytes:
    return znodes.encode({"partitions": [[topic, partition] for topic, partition in partitions]})


def decode_request(data: bytes) -> set[tuple[str, int]]:
    value = znodes.decode(znodes.PREFERRED_ELECTION, data, ("partitions",))
    try:
        return {(str(topic), int(partition)) for topic, partition in value["partitions"]}
    except (TypeError, ValueError) as error:
        raise CorruptJournalError(
            f"ZooKeeper znode {znodes.PREFERRED_ELECTION} does not hold a list of [topic, "
            f"partition] pairs ({error}): {data[:200]!r}"
        ) from None


def read_election_request(
    session: ZooKeeperSession, watch: Callable[[WatchedEvent], None] | None = None
) -> tuple[set[tuple[str, int]], int] | None:
    """The partitions asked for and the znode's version (for its delete), or None when no
    election is asked for. ``watch`` is set on the znode whether or not it exists."""
    found = read_request(session, znodes.PREFERRED_ELECTION, watch)
    return None if found is None else (decode_request(found[0]), found[1])


def request_preferred_election(
    session: ZooKeeperSession, partitions: Sequence[tuple[str, int]] | None, timeout_ms: int
) -> list[ElectionResult]:
    """Ask the controller to lead ``partitions`` (None: every partition of every topic) by
    their preferred leaders; wait at most ``timeout_ms`` for it. One result per partition,
    in the order asked (sorted for None)."""
    before = _states(session, partitions)
    asked = sorted(before) if partitions is None else list(dict.fromkeys(partitions))
    known = [key for key in asked if before.get(key) is not None]
    deadline_s = time.monotonic() + timeout_ms / 1000
    carried_out = True
    if known:
        path = znodes.PREFERRED_ELECTION
        carried_out = create_when_free(session, path, encode_request(known), deadline_s)
        carried_out = carried_out and wait_gone(session, path, deadline_s)
    after = _states(session, known) if known else {}
    return [
        _result(topic, partition, before.get((topic, partition)), after.get((topic, partition)),
                carried_out, timeout_ms)
        for topic, partition in asked
    ]  # fmt: skip


def _states(
    session: ZooKeeperSession, partitions: Sequence[tuple[str, int]] | None
) -> dict[tuple[str, int], PartitionState | None]:
    if partitions is None:
        topics = session.wait(session.client.get_children_async(znodes.TOPICS))
        return {
            (topic, partition): state
            for topic in sorted(topics)
            for partition, state in read_topic_partition_states(session, topic).items()
        }
    return {(t, p): read_partition_state(session, t, p) for t, p in dict.fromkeys(partitions)}


def _result(
    topic: str,
    partition: int,
    before: PartitionState | None,
    after: PartitionState | None,
    carried_out: bool,
    timeout_ms: int,
) -> ElectionResult:
    if before is None or after is None:
        return ElectionResult(
            topic, partition, ElectionOutcome.UNKNOWN_PARTITION, -1, -1,
            f"{topic}-{partition}: no such partition in the cluster",
        )  # fmt: skip
    preferred = after.replicas[0] if after.replicas else -1
    if after.leader == preferred:
        if before.leader == preferred:
            outcome, said = ElectionOutcome.NOT_NEEDED, "led by its preferred leader already"
        else:
            outcome, said = ElectionOutcome.ELECTED, f"leader {before.leader} -> {preferred}"
        return ElectionResult(topic, partition, outcome, after.leader, preferred, said)
    if not carried_out:
        return ElectionResult(
            topic, partition, ElectionOutcome.TIMED_OUT, after.leader, preferred,
            f"no controller carried the election out within {timeout_ms} ms; the request "
            "stays in ZooKeeper and the next controller carries it out",
        )  # fmt: skip
    why = (
        "is not in the ISR"
        if preferred not in after.isr_ids
        else "is not alive or is shutting down"
    )
    return ElectionResult(
        topic, partition, ElectionOutcome.NOT_AVAILABLE, after.leader, preferred,
        f"its preferred leader, broker {preferred}, {why} (ISR {list(after.isr_ids)}); "
        f"leader stays {after.leader}",
    )  # fmt: skip
