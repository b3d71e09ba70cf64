"""Topic settings changed on a cluster: every broker applies them to its replicas.

A data watch on every topic znode (kazoo's ``DataWatch``, armed again after each event),
and a children watch on ``topics`` that adds one for each new topic. An event puts the
topic's name on a queue; a thread of its own calls ``on_change(topic)`` (the broker reads
the settings and applies what differs: ``Broker.topic_config_changed``), never kazoo's
event thread, where blocking would stall every watch. The broker that made the change has
applied it already; for it the call finds nothing to do.

A topic znode also changes when its partitions are added: ``on_change`` compares, so that
costs a read. A watch missed while the session was SUSPENDED fires on reconnection
(ZooKeeper keeps watches across a reconnect within the session).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from kazoo.protocol.states import ZnodeStat
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from twinlog.engine.base.errors import TwinlogError
from twinlog.engine.zookeeper import znodes
from twinlog.engine.zookeeper.session import ZooKeeperSession

log = logging.getLogger(__name__)

JOIN_S = 10.0
_STOP = ""  # not a topic name


class TopicConfigWatch:
    """Thread rule: ``start`` and ``close`` from the owner; the rest runs on kazoo's event
    thread (only queueing) and on this watch's thread."""

    def __init__(self, session: ZooKeeperSession, on_change: Callable[[str], None]) -> None:
        self._session = session
        self._on_change = on_change
        self._changed: queue.SimpleQueue[str] = queue.SimpleQueue()
        self._watched: set[str] = set()  # topics with a data watch (kazoo's thread only)
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="topic-configs", daemon=True)

    def start(self) -> TopicConfigWatch:
        self._session.wait(self._session.client.ensure_path_async(znodes.TOPICS))
        ChildrenWatch(self._session.client, znodes.TOPICS, self._on_topics)
        self._thread.start()
        return self

    def close(self) -> None:
        self._closed.set()
        self._changed.put(_STOP)
        if self._thread.is_alive():
            self._thread.join(JOIN_S)

    # --- kazoo's event thread: queue only ---------------------------------------------

    def _on_topics(self, topics: list[str]) -> bool:
        if self._closed.is_set():
            return False  # kazoo drops the watch
        for topic in set(topics) - self._watched:
            self._watched.add(topic)
            DataWatch(self._session.client, znodes.topic_path(topic), self._data_watch(topic))
        return True

    def _data_watch(self, topic: str) -> Callable[[bytes | None, ZnodeStat | None], bool]:
        def on_data(data: bytes | None, stat: ZnodeStat | None) -> bool:
            if self._closed.is_set() or data is None:
                self._watched.discard(topic)  # deleted: a namesake gets a watch of its own
                return False
            if stat is not None and stat.version > 0:  # 0: created, nothing changed yet
                self._changed.put(topic)
            return True

        return on_data

    # --- the watch's thread -------------------------------------------------------------

    def _run(self) -> None:
        while True:
            topic = self._changed.get()
            if topic == _STOP:
                return
            try:
                self._on_change(topic)
            except TwinlogError as error:  # a full disk, a broker closing: say, go on
                log.warning("topic %s: its changed settings were not applied: %s", topic, error)
            except Exception:  # a bug must not end the thread
                log.exception("topic %s: applying its changed settings failed", topic)
