"""What the cluster tests share: ``wait_until`` and ``FakeBrokers`` (ZooKeeper sessions
that stand for broker processes: registered, running a Controller, closed on exit)."""

from __future__ import annotations

import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

from twinlog.engine.zookeeper.broker_registration import BrokerRegistration, register_broker
from twinlog.engine.zookeeper.controller import Controller
from twinlog.engine.zookeeper.session import ZooKeeperSession

SESSION_TIMEOUT_MS = 4000
WAIT_S = 30.0  # generous: a JVM and the tests share two busy cores
FULL_READ_INTERVAL_S = 1.0

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], timeout_s: float = WAIT_S, what: str = "") -> T:
    """The first true value of ``predicate``, polled until ``timeout_s``; AssertionError
    naming ``what`` (and the last value) if none comes."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {timeout_s} s: {what or predicate} (last {value!r})")
        time.sleep(0.02)


class FakeBroker:
    """One "broker": a session of its own, a registration, optionally a Controller."""

    def __init__(
        self,
        connect: str,
        broker_id: int,
        register: bool = True,
        control: bool = True,
        **controller_options: Any,
    ) -> None:
        self.broker_id = broker_id
        self.session = ZooKeeperSession(connect, session_timeout_ms=SESSION_TIMEOUT_MS)
        self.lost_calls = 0
        self.session_ended = False
        self.registration: BrokerRegistration | None = None
        if register:
            self.registration = register_broker(
                self.session, broker_id, "127.0.0.1", 9000 + broker_id, f"dir{broker_id}"
            )
        self.controller: Controller | None = None
        if control:
            self.controller = Controller(
                self.session,
                broker_id,
                on_lost=self._on_lost,
                full_read_interval_s=FULL_READ_INTERVAL_S,
                **controller_options,
            ).start()

    def _on_lost(self) -> None:
        self.lost_calls += 1

    @property
    def epoch(self) -> int:
        assert self.registration is not None
        return self.registration.broker_epoch

    def end_session(self) -> None:
        """The session ends (as when the process dies): ZooKeeper deletes the ephemerals at
        once; the controller, if any, sees the session lost and stops."""
        if not self.session_ended:
            self.session_ended = True
            self.session.close()

    def close(self) -> None:
        """The process dies: its session ends, then its controller thread is stopped."""
        self.end_session()
        if self.controller is not None:
            self.controller.close()


class FakeBrokers:
    def __init__(self, connect: str) -> None:
        self.connect = connect
        self.started: list[FakeBroker] = []

    def start(
        self, broker_id: int, register: bool = True, control: bool = True, **options: Any
    ) -> FakeBroker:
        """``options``: the Controller's keyword arguments (its preferred-leader settings)."""
        broker = FakeBroker(self.connect, broker_id, register, control, **options)
        self.started.append(broker)
        return broker

    def controllers(self) -> list[FakeBroker]:
        return [b for b in self.started if b.controller is not None and b.controller.active]

    def __enter__(self) -> FakeBrokers:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        for broker in self.started:
            broker.close()
