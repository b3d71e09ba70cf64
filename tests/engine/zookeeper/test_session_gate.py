"""What a ZooKeeper-driven worker may do per session state: act while CONNECTED, start
nothing while SUSPENDED (without spinning), stop and tell the owner once on LOST."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, cast

from twinlog.engine.zookeeper.session import ZooKeeperSession
from twinlog.engine.zookeeper.session_gate import SessionGate


class StubClient:
    def __init__(self) -> None:
        self.listeners: set[Callable[[str], None]] = set()

    def add_listener(self, listener: Callable[[str], None]) -> None:
        self.listeners.add(listener)

    def remove_listener(self, listener: Callable[[str], None]) -> None:
        self.listeners.discard(listener)


class StubSession:
    def __init__(self) -> None:
        self.client = StubClient()
        self.state = "CONNECTED"
        self.lost = False


def test_the_gate_follows_the_session_state() -> None:
    stub = StubSession()
    wakes: list[int] = []
    losses: list[int] = []
    gate = SessionGate(
        cast(ZooKeeperSession, cast(Any, stub)), lambda: wakes.append(1), lambda: losses.append(1)
    )
    assert gate.may_act() and not gate.lost_now()
    due = time.monotonic() + 10
    assert 0 < gate.idle_s(due, 0.25) <= 0.25
    assert gate.idle_s(0.0, 0.25) == 0.0  # a pass is due: no wait

    stub.state = "SUSPENDED"
    for listener in stub.client.listeners:
        listener("SUSPENDED")  # kazoo's thread: only a wake-up
    assert wakes == [1]
    assert not gate.may_act() and not gate.lost_now()
    assert gate.idle_s(0.0, 0.25) == 0.25  # a due pass waits instead of spinning

    stub.state, stub.lost = "LOST", True
    assert gate.lost_now() and gate.lost_now()
    assert losses == [1]  # told once
    stub.state = "CONNECTED"  # kazoo connected again with a new session
    assert not gate.may_act()  # what the first session held is gone: the broker restarts
    gate.close()
    assert not stub.client.listeners
