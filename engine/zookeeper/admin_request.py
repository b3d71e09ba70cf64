"""An operator's request to the controller, as one znode under ``admin``.

Any broker asks by creating the znode; the controller carries it out and deletes it in
the multi that writes what it decided (``Controller``). One request of a kind at a time,
as Kafka's: a second waits, bounded, for the first to be carried out. A request no
controller carried out in time stays, and is carried out by the next one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.protocol.states import WatchedEvent

from twinlog.engine.zookeeper import znodes
from twinlog.engine.zookeeper.session import ZooKeeperSession

RECHECK_S = 1.0  # a re-read even without a watch firing


def read_request(
    session: ZooKeeperSession, path: str, watch: Callable[[WatchedEvent], None] | None = None
) -> tuple[bytes, int] | None:
    """The request ``path`` holds and its znode's version (for its delete), or None when
    none is asked. ``watch`` is set on the znode whether or not it exists."""
    client = session.client
    stat = session.wait(client.exists_async(path, watch=watch))
    if stat is None:
        return None
    try:
        data, stat = session.wait(client.get_async(path))
    except NoNodeError:
        return None  # carried out since
    return data, stat.version


def create_when_free(session: ZooKeeperSession, path: str, data: bytes, deadline_s: float) -> bool:
    """Create the request ``path`` once no other is pending; False if one still was at
    ``deadline_s`` (``time.monotonic``)."""
    session.wait(session.client.ensure_path_async(znodes.ADMIN))
    while True:
        try:
            session.wait(session.client.create_async(path, data))
            return True
        except NodeExistsError:
            if not wait_gone(session, path, deadline_s):
                return False


def wait_gone(session: ZooKeeperSession, path: str, deadline_s: float) -> bool:
    """Until the request znode is gone (the controller carried it out); False at the deadline."""
    while True:
        changed = threading.Event()
        stat = session.wait(session.client.exists_async(path, watch=_setter(changed)))
        if stat is None:
            return True
        remaining_s = deadline_s - time.monotonic()
        if remaining_s <= 0:
            return False
        changed.wait(min(remaining_s, RECHECK_S))


def _setter(event: threading.Event) -> Callable[[WatchedEvent], None]:
    return lambda _watched: event.set()  # kazoo's thread: only signal
