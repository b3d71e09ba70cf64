"""What a ZooKeeper-driven worker may do in each session state (CLUSTER.md I11).

    CONNECTED   act
    SUSPENDED   start nothing new (no election, no ISR change, no new role): the session
                may still live, and whatever was started before finishes or times out
    LOST        stop for good and tell the owner once (``on_lost``): the broker process
                exits and its supervisor restarts it (crash-only, docs/zookeeper.md)

Safety never rests on noticing these states (epochs fence a zombie's writes); the gate
only keeps a worker from starting what cannot be finished.

``SessionGate`` adds a kazoo listener that only calls ``wake`` (which must not block:
kazoo runs listeners on its one event thread), so the worker's own thread looks at the
state promptly. The session wrapper also declares LOST by its own clock, which no listener
hears; the worker calls ``lost_now`` on each pass, at least every few hundred ms.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from kazoo.client import KazooState

from twinlog.engine.zookeeper.session import ZooKeeperSession


class SessionGate:
    def __init__(
        self,
        session: ZooKeeperSession,
        wake: Callable[[], None],
        on_lost: Callable[[], None] | None = None,
    ) -> None:
        self.session = session
        self._wake = wake
        self._on_lost = on_lost
        self._lost_reported = False
        self._lock = threading.Lock()
        session.client.add_listener(self._on_state)

    def _on_state(self, _state: str) -> None:
        self._wake()  # kazoo's event thread: only wake the worker

    def may_act(self) -> bool:
        """Connected, and the first session never lost: ZooKeeper-dependent work may start."""
        return self.session.state == KazooState.CONNECTED and not self.session.lost

    def idle_s(self, due: float, poll_s: float) -> float:
        """How long a worker waits for its next event: until its next pass is ``due``
        (a ``time.monotonic()`` value), at most ``poll_s`` (to look at the session state),
        and ``poll_s`` while it may not act (a pass due stays due; waiting less would spin)."""
        if not self.may_act():
            return poll_s
        return max(0.0, min(poll_s, due - time.monotonic()))

    def lost_now(self) -> bool:
        """True once the session is lost; the first caller to see it calls ``on_lost``."""
        if not self.session.lost:
            return False
        with self._lock:
            report, self._lost_reported = not self._lost_reported, True
        if report and self._on_lost is not None:
            self._on_lost()
        return True

    def close(self) -> None:
        self.session.client.remove_listener(self._on_state)
