"""Controlled shutdown: a broker hands its leaderships over before it stops.

    brokers/shutting_down/<id>    EPHEMERAL, empty: made by the broker that is stopping

The controller sees the request (a watch on ``brokers/shutting_down``), moves the
leadership of every partition the broker leads to the next live ISR member in
assignment order (leader_epoch + 1) and takes the broker out of the ISRs it shares with
a live member, so clients and followers move on before its session ends rather than a
session timeout after. A partition whose only ISR member is this broker keeps it as
leader: moving it would need an unclean election.

The request is ephemeral: it goes with the session, as the broker's registration does.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from kazoo.exceptions import NodeExistsError
from kazoo.protocol.states import WatchedEvent

from twinlog.engine.zookeeper import znodes
from twinlog.engine.zookeeper.partition_state import PartitionState, read_topic_partition_states
from twinlog.engine.zookeeper.session import ZooKeeperSession

RECHECK_S = 1.0  # a re-read even without a watch firing (watches coalesce)


def request_controlled_shutdown(
    session: ZooKeeperSession, broker_id: int, timeout_ms: int
) -> list[tuple[str, int]]:
    """Ask the controller to move ``broker_id``'s leaderships away, and wait at most
    ``timeout_ms`` for it. Returns the partitions the broker still leads: [] when all moved;
    otherwise those where it is the only ISR member (which stay), or, at the deadline,
    whatever the controller did not move in time."""
    client = session.client
    session.wait(client.ensure_path_async(znodes.SHUTTING_DOWN))
    try:
        session.wait(client.create_async(znodes.shutting_down_path(broker_id), ephemeral=True))
    except NodeExistsError:
        pass  # asked already (this session, or an earlier attempt whose answer was lost)
    deadline = time.monotonic() + timeout_ms / 1000
    changed = threading.Event()

    def on_change(_event: WatchedEvent) -> None:
        changed.set()  # kazoo's thread: only signal

    while True:
        changed.clear()
        led = _led_by(session, broker_id, on_change)
        remaining = deadline - time.monotonic()
        only_member = all(state.isr_ids == (broker_id,) for state in led.values())
        if not led or only_member or remaining <= 0:
            return sorted(led)
        changed.wait(min(remaining, RECHECK_S))


def _led_by(
    session: ZooKeeperSession, broker_id: int, on_change: Callable[[WatchedEvent], None]
) -> dict[tuple[str, int], PartitionState]:
    client = session.client
    session.wait(client.ensure_path_async(znodes.TOPICS))
    topics = session.wait(client.get_children_async(znodes.TOPICS))
    led: dict[tuple[str, int], PartitionState] = {}
    for topic in topics:
        states = read_topic_partition_states(session, topic, watch=on_change)
        for partition, state in states.items():
            if state.leader == broker_id:
                led[topic, partition] = state
    return led
