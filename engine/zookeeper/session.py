"""A ZooKeeper session through kazoo: ``ZooKeeperSession``.

    with ZooKeeperSession("127.0.0.1:2181/twinlog/prod", session_timeout_ms=6000) as session:
        session.client.get("/cluster_id")            # paths are below the chroot

The chroot is created if missing (kazoo only warns when it is absent). The connect
is bounded: ZooKeeperUnavailableError names the address when no session comes.

With a ``credential`` (``twinlog.engine.zookeeper.credentials``) the session
authenticates with it at every connect, and every znode it creates, through any
kazoo call that takes no explicit ACL (create, ensure_path, a multi's create, the
chroot and whichever of its parents are missing), gets the credential's ACL: all
permissions for that identity, none for anyone else. Without one, znodes are
world-open, as ZooKeeper's default.

Connection states are kazoo's: CONNECTED, SUSPENDED (the connection dropped; the
session may still live on the server), LOST (the session expired or was closed:
ephemeral znodes and watches are gone). kazoo calls the listener on its one event
thread, where blocking would stall every other callback and watch, so the listener
only records the state and puts it on ``events``; the owner reads ``state``,
``suspended`` and ``lost``, or takes ``events`` in order.

LOST also comes from this wrapper's own clock, as Curator does it: a connection
SUSPENDED for a whole session timeout is declared LOST, because a server that was
running has expired the session by then and the cluster may have acted on it. kazoo
alone learns of the expiry only when it reaches a server again, which a partitioned
broker, or one whose ZooKeeper is paused, may not do for a long time. (A server that
was itself paused may still take the session back on reconnecting; the owner has
let go of it by then, which is the safe side.) The timeout is the one asked for: a
server that negotiates a longer one expires later, never earlier, than this says.

``lost`` stays true once the first session is declared gone, even after kazoo
connects again: whatever the owner held through it (ephemerals, roles) must be
taken as gone, and a broker then restarts (crash-only, docs/zookeeper.md).

Thread rule: any thread may read; ``close`` once, from the owner.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    ConnectionLoss,
    NoAuthError,
    OperationTimeoutError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError

from twinlog.engine.base.errors import BrokerUnavailableError, InvalidConfigError
from twinlog.engine.zookeeper.credentials import ZooKeeperCredential

SESSION_TIMEOUT_MS = 6000  # Kafka's zookeeper.session.timeout.ms is 18 s; tests use less
CONNECT_TIMEOUT_MS = 15_000
REQUEST_TIMEOUT_MS = 10_000  # a request queued on a dropped connection waits at most this


class ZooKeeperUnavailableError(BrokerUnavailableError):
    """ZooKeeper could not be reached, or did not answer in time: retry later.

    The message names the address. A write that timed out may or may not have
    been applied; read before writing again.
    """


def split_connect_string(connect: str) -> tuple[str, str]:
    """``"h1:p1,h2:p2/a/b"`` -> (``"h1:p1,h2:p2"``, ``"/a/b"``); no chroot gives ``""``."""
    hosts, slash, chroot = connect.partition("/")
    return hosts, (slash + chroot).rstrip("/")


class ZooKeeperSession:
    def __init__(
        self,
        connect: str,
        session_timeout_ms: int = SESSION_TIMEOUT_MS,
        connect_timeout_ms: int = CONNECT_TIMEOUT_MS,
        request_timeout_ms: int = REQUEST_TIMEOUT_MS,
        *,
        create_chroot: bool = True,
        credential: ZooKeeperCredential | None = None,
    ) -> None:
        """Connect to ``host:port[,host:port...][/chroot]``, creating the chroot; with
        ``create_chroot=False`` (a read-only tool) a missing chroot is an
        InvalidConfigError instead, and nothing is written. ``credential``: authenticate
        with it and create every znode readable and writable by it alone."""
        self.connect = connect
        self.credential = credential  # None: world-open znodes, no authentication
        self.session_timeout_ms = session_timeout_ms
        self.request_timeout_s = request_timeout_ms / 1000
        self.events: queue.SimpleQueue[str] = queue.SimpleQueue()
        self._state_lock = threading.Lock()
        self._state: str = KazooState.LOST  # kazoo's state before the first connect
        self._lost = False
        self._connected_once = False
        self._suspended_timer: threading.Timer | None = None
        self._changes = 0  # state changes recorded: tells a stale timer from a live one
        hosts, chroot = split_connect_string(connect)
        if chroot:
            self._create_chroot(hosts, chroot, connect_timeout_ms, create_chroot)
        self.client = self._kazoo_client(connect)
        self.client.add_listener(self._on_state)
        self._start(self.client, connect_timeout_ms)

    def _create_chroot(
        self, hosts: str, chroot: str, connect_timeout_ms: int, create: bool
    ) -> None:
        bare = self._kazoo_client(hosts)
        self._start(bare, connect_timeout_ms)
        try:
            try:
                found = self.wait(bare.exists_async(chroot))
            except NoAuthError:  # ZooKeeper checks READ on exists: it is there, not for us
                raise InvalidConfigError(
                    f"{self.connect}: ZooKeeper refused to let {self.describe_identity()} look "
                    f"at {chroot} (NoAuth): the chroot is locked with another credential. Give "
                    "this broker the cluster's ZooKeeper credentials file (the one the other "
                    "brokers were given), or point it at another chroot; nothing was written"
                ) from None
            if found is not None:
                return  # its contents and ACLs are checked at join, before any write
            if not create:
                raise InvalidConfigError(
                    f"{self.connect}: ZooKeeper has no {chroot}: no twinlog cluster was "
                    "started there; give the chroot the brokers were given (twinlog serve "
                    "--zookeeper HOST:PORT/CHROOT)"
                )
            self.wait(bare.ensure_path_async(chroot))
        except NoAuthError:
            raise InvalidConfigError(
                f"{self.connect}: ZooKeeper refused to create {chroot} (NoAuth): a parent of "
                f"it is locked with an ACL that {self.describe_identity()} may not use; use a "
                "chroot outside it, or have the parent's owner create the chroot"
            ) from None
        finally:
            bare.stop()
            bare.close()

    def _kazoo_client(self, hosts: str) -> KazooClient:
        if self.credential is None:
            return KazooClient(hosts=hosts, timeout=self.session_timeout_ms / 1000)
        return KazooClient(
            hosts=hosts,
            timeout=self.session_timeout_ms / 1000,
            auth_data=self.credential.auth_data,
            default_acl=self.credential.acl,  # kazoo's ACL for every create given none
        )

    def describe_identity(self) -> str:
        """This session's identity, for errors (never the password)."""
        if self.credential is None:
            return "a client without a credential"
        return f"the credential {self.credential}"

    def _start(self, client: KazooClient, connect_timeout_ms: int) -> None:
        try:
            client.start(timeout=connect_timeout_ms / 1000)
        except KazooTimeoutError:
            raise ZooKeeperUnavailableError(
                f"no ZooKeeper session with {self.connect} within {connect_timeout_ms} ms: is "
                "ZooKeeper running there (echo ruok | nc HOST PORT answers imok)?"
            ) from None

    def _on_state(self, state: str) -> None:
        # kazoo's event thread: record and queue, never block (no I/O, no waiting).
        self._record(state)

    def _record(self, state: str, changes_seen: int | None = None) -> None:
        """``changes_seen``: from the SUSPENDED timer, the count of changes when it started."""
        with self._state_lock:
            if changes_seen is not None and changes_seen != self._changes:
                return  # the connection came back (or was lost) before the timer fired
            if state == self._state:
                return  # kazoo's LOST after this wrapper's own
            self._state = state
            self._changes += 1
            if self._suspended_timer is not None:
                self._suspended_timer.cancel()  # non-blocking
                self._suspended_timer = None
            if state == KazooState.CONNECTED:
                self._connected_once = True
            elif state == KazooState.SUSPENDED:
                self._suspended_timer = threading.Timer(
                    self.session_timeout_ms / 1000, self._record, (KazooState.LOST, self._changes)
                )
                self._suspended_timer.daemon = True
                self._suspended_timer.start()
            elif state == KazooState.LOST and self._connected_once:
                self._lost = True
        self.events.put(state)

    @property
    def state(self) -> str:
        """ "CONNECTED", "SUSPENDED" or "LOST" (kazoo's ``KazooState``), as now."""
        return self._state

    @property
    def suspended(self) -> bool:
        """The connection is down now; the session may still live on the server."""
        return self._state == KazooState.SUSPENDED

    @property
    def lost(self) -> bool:
        """The first session has expired or was closed (stays true after a reconnect)."""
        return self._lost

    def wait(self, pending: Any) -> Any:
        """The result of a kazoo ``*_async`` request, waited for at most ``request_timeout_ms``
        (a sync kazoo call queued on a dropped connection could wait for ever)."""
        with self.translated_errors():
            return pending.get(timeout=self.request_timeout_s)

    @contextmanager
    def translated_errors(self) -> Iterator[None]:
        """kazoo's connection errors as ZooKeeperUnavailableError naming the address."""
        try:
            yield
        except (ConnectionLoss, OperationTimeoutError, KazooTimeoutError) as error:
            raise ZooKeeperUnavailableError(
                f"ZooKeeper at {self.connect} did not answer ({type(error).__name__}); the "
                "request's outcome is unknown"
            ) from error
        except SessionExpiredError as error:
            raise ZooKeeperUnavailableError(
                f"the ZooKeeper session with {self.connect} expired; the request's outcome is "
                "unknown"
            ) from error

    def close(self) -> None:
        with self._state_lock:
            if self._suspended_timer is not None:
                self._suspended_timer.cancel()
                self._suspended_timer = None
        self.client.stop()
        self.client.close()

    def __enter__(self) -> ZooKeeperSession:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
