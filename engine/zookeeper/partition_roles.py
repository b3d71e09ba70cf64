"""A broker's roles: the states of the partitions it replicates, as they change.

``PartitionRoles`` watches the state znodes of the partitions whose ``replicas`` include
this broker and hands each new state to ``on_change(topic, partition, state)`` on a
thread of its own (never kazoo's event thread, where blocking would stall every watch):
per partition in zkVersion order, never the same version twice, the latest when several
changes came between two reads. The broker compares ``state.leader`` and
``leader_epoch`` with what it holds and becomes leader or follower accordingly. A
reassignment changes ``replicas``: the first state that names this broker makes it a
replica, and the first that no longer does is handed over too (the broker drops its
copy, if it holds one), as is every other broker's partition when first read.

Discovery: a children watch on ``topics`` and on each ``topics/<t>/partitions``; a data
watch on every state znode (this broker's, and the others', which a reassignment may
make its own); a full read of this broker's every ``full_read_interval_s``, or less
often when it takes long (``full_reads``: a safety net for a missed watch, never more
than a tenth of the thread's time). Each watch re-reads what it is about, nothing more:
a state znode's, that znode; ``topics``' children, the topic list and the topics new to
it; a topic's ``partitions`` children, that topic's new partitions. (A new topic used to
read everything again, every partition state of this broker included: creating the
topics of a 10,000-partition cluster one after another cost each broker a number of
reads growing with the square of the topics.) A topic deleted and made again under the
same name is told apart by its znodes' czxid.

Session states (``session_gate``): while SUSPENDED no new role is delivered; on LOST the
thread stops and calls ``on_lost`` (the broker exits, crash-only).

``change_isr`` is the partition leader's own ISR write (KIP-497): a set of the state
znode conditional on the zkVersion the leader holds, not fenced by the controller epoch.
It fails with IsrChangeLostError carrying the fresh state when the znode changed: the
leader then checks whether ``leader_epoch`` moved (it is no longer leader) or only the
ISR (it decides again from the fresh ISR).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from types import TracebackType

from kazoo.exceptions import BadVersionError, KazooException, NoNodeError
from kazoo.protocol.states import EventType, WatchedEvent

from twinlog.engine.base.errors import ConditionalWriteLostError, CorruptJournalError
from twinlog.engine.zookeeper import znodes
from twinlog.engine.zookeeper.full_reads import next_full_read_s
from twinlog.engine.zookeeper.partition_state import (
    IsrMember,
    PartitionState,
    read_partition_state,
)
from twinlog.engine.zookeeper.session import ZooKeeperSession, ZooKeeperUnavailableError
from twinlog.engine.zookeeper.session_gate import SessionGate

log = logging.getLogger("twinlog.partition_roles")

FULL_READ_INTERVAL_S = 5.0
POLL_S = 0.25  # the thread looks at the session state at least this often
RETRY_AFTER_S = 0.5
JOIN_S = 10.0

RoleCallback = Callable[[str, int, PartitionState], None]
# The queue's reasons: a full read; the topic list; one topic's partitions (the prefix
# and its name); any other is a state znode's path.
FULL_READ = ""
TOPIC_LIST = "topics"
TOPIC_PREFIX = "topic:"


class IsrChangeLostError(ConditionalWriteLostError):
    """The state znode changed since the leader read it; nothing was written.

    ``current`` is the state now (None if the partition is gone): if its ``leader_epoch``
    moved, the caller is no longer leader of this epoch and stops acting as one."""

    def __init__(self, message: str, current: PartitionState | None) -> None:
        super().__init__(message)
        self.current = current


def change_isr(
    session: ZooKeeperSession,
    topic: str,
    partition: int,
    new_isr: Sequence[IsrMember],
    expected_version: int,
) -> PartitionState:
    """Write ``new_isr`` into the partition's state if the znode is still at
    ``expected_version``; the state written (with its new version).

    For the partition's leader only, and not while the session is SUSPENDED or LOST
    (I11: ZooKeeperUnavailableError). The other fields are kept as they are at that
    version: only the ISR changes."""
    if session.suspended or session.lost:
        raise ZooKeeperUnavailableError(
            f"ZooKeeper session with {session.connect} is {session.state}: no ISR change "
            f"for {topic}-{partition} until it is connected"
        )
    current = read_partition_state(session, topic, partition)
    if current is None or current.version != expected_version:
        raise _lost(topic, partition, expected_version, current)
    isr = tuple(new_isr)
    _check_isr(topic, partition, current, isr)
    wanted = replace(current, isr=isr)
    path = znodes.partition_state_path(topic, partition)
    try:
        stat = session.wait(session.client.set_async(path, wanted.encode(), expected_version))
    except (BadVersionError, NoNodeError):
        raise _lost(
            topic, partition, expected_version, read_partition_state(session, topic, partition)
        ) from None
    return replace(wanted, version=stat.version)


def _check_isr(
    topic: str, partition: int, current: PartitionState, isr: tuple[IsrMember, ...]
) -> None:
    ids = [member.broker_id for member in isr]
    if (
        current.leader not in ids
        or len(set(ids)) != len(ids)
        or not set(ids) <= set(current.replicas)
    ):
        raise ValueError(
            f"{topic}-{partition}: ISR {ids} must hold the leader {current.leader}, each "
            f"broker once, and only replicas {list(current.replicas)}"
        )


def _lost(
    topic: str, partition: int, expected_version: int, current: PartitionState | None
) -> IsrChangeLostError:
    now = "is gone" if current is None else f"is at version {current.version}: {current.describe()}"
    return IsrChangeLostError(
        f"{topic}-{partition}: the state znode changed since version {expected_version} "
        f"(it {now}); nothing was written. A leader whose leader_epoch moved is no longer "
        "leader; otherwise decide again from the state read now.",
        current,
    )


@dataclass
class _Seen:
    """What was last read of one partition: its znode's czxid (a new znode, a new
    partition) and the version delivered; ``mine`` is False for other brokers'."""

    czxid: int
    version: int
    mine: bool


class _ReadAsked:
    """A ``read_now`` caller: told once a full read begun after its ask handed its states
    over (``read``), or once no read will come (``read`` False)."""

    __slots__ = ("done", "read")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.read = False

    def tell(self, read: bool) -> None:
        self.read = read
        self.done.set()


class PartitionRoles:
    def __init__(
        self,
        session: ZooKeeperSession,
        broker_id: int,
        on_change: RoleCallback,
        *,
        on_lost: Callable[[], None] | None = None,
        full_read_interval_s: float = FULL_READ_INTERVAL_S,
        on_first_read: Callable[[], None] | None = None,
    ) -> None:
        """``on_first_read()``: called once, when the first full read has handed every
        partition's state over (the broker knows all its roles from then on)."""
        self.session = session
        self._on_first_read = on_first_read
        self.broker_id = broker_id
        self.on_change = on_change
        self.full_read_interval_s = full_read_interval_s
        self._events: queue.SimpleQueue[str] = queue.SimpleQueue()
        self._gate = SessionGate(session, lambda: self._wake(FULL_READ), on_lost)
        self._seen: dict[tuple[str, int], _Seen] = {}
        self._parents: dict[str, int] = {}  # topic -> czxid of its partitions znode
        self._listed: set[str] = set()  # the topics ``topics`` held at its last read
        self._delivered: dict[tuple[str, int], PartitionState] = {}
        self._lock = threading.Lock()
        self._reads_asked: list[_ReadAsked] = []  # guarded by ``_lock``
        self._reads_closed = False  # under ``_lock``: the thread has ended, none will come
        self._stopping = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"twinlog-partition-roles-{broker_id}", daemon=True
        )

    def start(self) -> PartitionRoles:
        self._thread.start()
        return self

    def states(self) -> dict[tuple[str, int], PartitionState]:
        """The last state of each of this broker's partitions that its partition took."""
        with self._lock:
            return dict(self._delivered)

    def read_now(self, timeout_s: float) -> bool:
        """Read every partition's state now, on this object's thread, and return once the
        new states are handed over (True). A broker's controlled shutdown calls it: the
        controller has moved its leaderships, and the broker should step down before it
        closes, not answer as leader until then. False at once if no read will come (the
        reader has stopped), or after ``timeout_s`` (ZooKeeper away)."""
        asked = _ReadAsked()
        with self._lock:  # against the thread's end: an ask after it is never told
            if self._reads_closed or self._stopping.is_set() or not self._thread.is_alive():
                return False
            self._reads_asked.append(asked)
        self._wake(FULL_READ)
        asked.done.wait(timeout_s)
        return asked.read

    def _take_reads_asked(self) -> list[_ReadAsked]:
        with self._lock:
            asked, self._reads_asked = self._reads_asked, []
        return asked

    def close(self) -> None:
        self._stopping.set()
        self._wake(FULL_READ)
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(JOIN_S)
        self._gate.close()

    def __enter__(self) -> PartitionRoles:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # --- kazoo's thread: wake only ------------------------------------------

    def _wake(self, reason: str) -> None:
        self._events.put(reason)  # SimpleQueue.put never blocks

    def _on_children(self, event: WatchedEvent) -> None:
        """Children of ``topics`` or of a topic's ``partitions`` (a children watch), or
        the ``partitions`` znode made or removed (an exists watch set while it was not
        there): the list, or that topic, is read again."""
        path = event.path or ""
        if path == znodes.TOPICS:
            self._wake(TOPIC_LIST)
            return
        parts = path.strip("/").split("/")
        if len(parts) == 3 and "/" + parts[0] == znodes.TOPICS and parts[2] == "partitions":
            self._wake(TOPIC_PREFIX + parts[1])
        else:
            self._wake(FULL_READ)

    def _on_state(self, event: WatchedEvent) -> None:
        if event.type == EventType.DELETED or not event.path:
            self._wake(FULL_READ)
        else:
            self._wake(event.path)

    # --- this object's thread ------------------------------------------------

    def _run(self) -> None:
        due = 0.0  # the next full read
        paths: set[str] = set()  # state znodes whose watch fired
        topics: set[str] = set()  # topics whose partitions changed
        listing = False  # the topic list changed
        while not self._stopping.is_set():
            reasons: list[str] = []
            try:
                reasons.append(self._events.get(timeout=self._gate.idle_s(due, POLL_S)))
                while True:  # what queued meanwhile is covered by the same read
                    reasons.append(self._events.get_nowait())
            except queue.Empty:
                pass
            for reason in reasons:
                if reason == FULL_READ:
                    due = 0.0
                elif reason == TOPIC_LIST:
                    listing = True
                elif reason.startswith(TOPIC_PREFIX):
                    topics.add(reason[len(TOPIC_PREFIX) :])
                else:
                    paths.add(reason)
            if self._stopping.is_set() or self._gate.lost_now():
                break
            full = time.monotonic() >= due
            if not (full or paths or topics or listing) or not self._gate.may_act():
                continue  # SUSPENDED: no new role; what is pending waits for CONNECTED
            asked: list[_ReadAsked] = []
            try:
                if full:
                    started_s = time.monotonic()
                    due = started_s + self.full_read_interval_s  # (if the read fails)
                    asked = self._take_reads_asked()  # asked before this read: it serves them
                    self._read_all()
                    for each in asked:
                        each.tell(True)
                    asked = []
                    due = next_full_read_s(started_s, time.monotonic(), self.full_read_interval_s)
                    if self._on_first_read is not None:
                        first_read, self._on_first_read = self._on_first_read, None
                        first_read()
                    listing = False
                    topics.clear()  # read by the full read, watches set again
                if listing:
                    listing = False  # (cleared first: a failed read is retried in full)
                    self._read_topic_list()
                while topics:
                    self._read_topic(topics.pop(), states_mine_too=False)
                # Even after a full read: it reads this broker's partitions only, and the
                # watch of another broker's that fired is set again only by its own read
                # (dropped, a reassignment naming this broker would never be seen).
                while paths:
                    self._read_one(paths.pop())
            except (ZooKeeperUnavailableError, KazooException) as error:
                log.warning("broker %d roles: ZooKeeper: %r; retrying", self.broker_id, error)
                due = time.monotonic() + RETRY_AFTER_S
            except CorruptJournalError as error:
                log.error("broker %d roles: %s", self.broker_id, error)
                due = time.monotonic() + self.full_read_interval_s
            except Exception:  # a bug must not end the thread: the broker would go deaf
                log.exception("broker %d roles: the read failed", self.broker_id)
                due = time.monotonic() + RETRY_AFTER_S
            if asked:  # the read failed: the next one serves them
                with self._lock:
                    self._reads_asked[:0] = asked
        with self._lock:  # no read will come: those asked are told, later ones refused
            self._reads_closed = True
            asked, self._reads_asked = self._reads_asked, []
        for each in asked:
            each.tell(False)

    def _read_all(self) -> None:
        client = self.session.client
        self.session.wait(client.ensure_path_async(znodes.TOPICS))
        topics = set(
            self.session.wait(client.get_children_async(znodes.TOPICS, watch=self._on_children))
        )
        self._listed = topics
        for topic in set(self._parents) - topics:
            self._forget(topic)  # deleted
        for topic in sorted(topics):
            self._read_topic(topic)

    def _read_topic_list(self) -> None:
        """``topics``' children changed: read the topics new to the list; forget those
        gone from it. (One deleted and made again between two reads is told by its own
        ``partitions`` watch.)"""
        client = self.session.client
        topics = set(
            self.session.wait(client.get_children_async(znodes.TOPICS, watch=self._on_children))
        )
        new, gone = topics - self._listed, self._listed - topics
        self._listed = topics
        for topic in gone:
            self._forget(topic)
        for topic in sorted(new):
            self._read_topic(topic, states_mine_too=False)

    def _read_topic(self, topic: str, states_mine_too: bool = True) -> None:
        """The topic's partitions: the states of those not read before, and with
        ``states_mine_too`` (a full read) this broker's again."""
        client = self.session.client
        parent = znodes.partitions_path(topic)
        try:
            children, stat = self.session.wait(
                client.get_children_async(parent, watch=self._on_children, include_data=True)
            )
        except NoNodeError:
            # No states yet: be told when the controller creates them.
            if self.session.wait(client.exists_async(parent, watch=self._on_children)) is None:
                self._forget(topic)
                return
            children, stat = self.session.wait(client.get_children_async(parent, None, True))
        if self._parents.get(topic, stat.czxid) != stat.czxid:
            self._forget(topic)  # deleted and made again since the last read
        self._parents[topic] = stat.czxid
        for partition in sorted(int(child) for child in children if child.isdigit()):
            seen = self._seen.get((topic, partition))
            if seen is None or (seen.mine and states_mine_too):
                self._read_state(topic, partition)

    def _read_one(self, path: str) -> None:
        # topics/<topic>/partitions/<p>/state
        parts = path.strip("/").split("/")
        if len(parts) != 5 or parts[0] != znodes.TOPICS.strip("/") or not parts[3].isdigit():
            return
        topic, partition = parts[1], int(parts[3])
        if (topic, partition) in self._seen:  # another broker's too: a reassignment may add us
            self._read_state(topic, partition)

    def _read_state(self, topic: str, partition: int) -> None:
        path = znodes.partition_state_path(topic, partition)
        try:
            data, stat = self.session.wait(self.session.client.get_async(path, self._on_state))
        except NoNodeError:
            return  # being deleted, or not created yet: the children watch tells
        state = PartitionState.decode(path, data, stat.version)
        key = (topic, partition)
        seen = self._seen.get(key)
        if seen is not None and seen.czxid == stat.czxid and stat.version <= seen.version:
            return  # delivered already (a full read and a watch may both read it)
        mine = self.broker_id in state.replicas
        # Another broker's partition is handed over once: the first time it is read (a
        # copy left here by a reassignment that ended while this broker was down is
        # dropped) and when a reassignment took it from this broker.
        known_elsewhere = seen is not None and seen.czxid == stat.czxid and not seen.mine
        self._seen[key] = _Seen(stat.czxid, stat.version, mine)
        if not mine:
            with self._lock:
                self._delivered.pop(key, None)
        if mine or not known_elsewhere:
            try:
                self.on_change(topic, partition, state)
                # Published once the partition took it, never before: the ISR writer acts on
                # these states (a write conditional on this version, then the leader's
                # confirm). Published first, a newer ISR could be written and confirmed and
                # this older one then confirmed over it, shrinking the leader's view of the
                # ISR below ZooKeeper's (its high watermark passing a member ZooKeeper still
                # lists in sync, which the controller may elect).
                if mine:
                    with self._lock:
                        self._delivered[key] = state
            except Exception:
                log.exception(
                    "broker %d roles: the role change of %s-%d (%s) failed",
                    self.broker_id,
                    topic,
                    partition,
                    state.describe(),
                )

    def _forget(self, topic: str) -> None:
        self._parents.pop(topic, None)
        for key in [key for key in self._seen if key[0] == topic]:
            del self._seen[key]
        with self._lock:
            for key in [key for key in self._delivered if key[0] == topic]:
                del self._delivered[key]
