"""The session wrapper: creates its chroot, connects within a bound or says where it
could not, and reports SUSPENDED then LOST when the server stops answering past the
session timeout."""

from __future__ import annotations

import queue
import time

import pytest

from twinlog.engine.base.errors import InvalidConfigError
from twinlog.engine.zookeeper.session import (
    ZooKeeperSession,
    ZooKeeperUnavailableError,
    split_connect_string,
)
from twinlog.rpc.cli.local_zookeeper import LocalZooKeeper, free_loopback_port

WAIT_S = 20.0  # generous: a JVM and kazoo share two busy cores
SHORT_SESSION_TIMEOUT_MS = 2000  # the server's tick allows 1..10 s


def next_event(session: ZooKeeperSession, deadline: float) -> str:
    try:
        return session.events.get(timeout=max(0.0, deadline - time.monotonic()))
    except queue.Empty:
        raise AssertionError(f"no state change within the deadline (now {session.state})") from None


def test_the_chroot_is_created_and_paths_are_below_it(
    zookeeper: LocalZooKeeper, zk_connect: str
) -> None:
    _hosts, chroot = split_connect_string(zk_connect)
    with ZooKeeperSession(zk_connect) as session:
        session.client.create("/inside", b"x")
        assert session.state == "CONNECTED" and not session.suspended and not session.lost
        assert session.events.get_nowait() == "CONNECTED"
    with ZooKeeperSession(zookeeper.connect_string) as bare:
        assert bare.client.get(f"{chroot}/inside")[0] == b"x"


def test_a_read_only_session_reports_a_missing_chroot_and_creates_nothing(
    zookeeper: LocalZooKeeper, zk_connect: str
) -> None:
    _hosts, chroot = split_connect_string(zk_connect)
    with pytest.raises(InvalidConfigError, match="has no /twinlog/"):
        ZooKeeperSession(zk_connect, create_chroot=False)
    with ZooKeeperSession(zookeeper.connect_string) as bare:
        assert bare.client.exists(chroot) is None
    with ZooKeeperSession(zk_connect):
        pass  # created now
    with ZooKeeperSession(zk_connect, create_chroot=False) as read_only:
        assert read_only.state == "CONNECTED"


def test_split_connect_string() -> None:
    assert split_connect_string("a:1,b:2/x/y/") == ("a:1,b:2", "/x/y")
    assert split_connect_string("a:1") == ("a:1", "")


def test_no_server_is_a_typed_error_within_the_bound() -> None:
    address = f"127.0.0.1:{free_loopback_port()}/twinlog/none"  # nothing listens there
    started = time.monotonic()
    with pytest.raises(ZooKeeperUnavailableError, match=r"127\.0\.0\.1:.*within 1000 ms") as error:
        ZooKeeperSession(address, connect_timeout_ms=1000)
    assert error.value.retriable
    assert time.monotonic() - started < 10


def test_a_server_paused_past_the_session_timeout_gives_suspended_then_lost(
    zookeeper: LocalZooKeeper, zk_connect: str
) -> None:
    with ZooKeeperSession(zk_connect, session_timeout_ms=SHORT_SESSION_TIMEOUT_MS) as session:
        assert next_event(session, time.monotonic() + WAIT_S) == "CONNECTED"
        zookeeper.pause()
        paused_at = time.monotonic()
        try:
            # kazoo drops the connection after two thirds of the session timeout without a
            # ping; a session timeout later, the wrapper declares the session lost, while the
            # server is still paused (kazoo alone would not know until it reached a server).
            assert next_event(session, paused_at + WAIT_S) == "SUSPENDED"
            assert session.suspended and not session.lost
            assert next_event(session, paused_at + WAIT_S) == "LOST"
            lost_after_s = time.monotonic() - paused_at
            assert session.lost and session.state == "LOST"
        finally:
            zookeeper.resume()
        assert lost_after_s >= session.session_timeout_ms / 1000
        # The server may take the old session back or expire it; either way kazoo connects.
        assert next_event(session, time.monotonic() + WAIT_S) == "CONNECTED"
        assert session.lost, "lost stays true: what the first session held is taken as gone"
        assert session.client.exists("/") is not None
