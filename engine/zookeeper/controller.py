"""``Controller``: every broker runs one; the elected one decides leaders and ISRs.

Kafka's ZooKeeper-mode controller (CLUSTER.md §2.2, §3.2), on a thread of its own:

- Election (``controller_epoch``): the broker that creates the EPHEMERAL ``controller``
  (in one multi with the bump of ``controller_epoch``) is controller until its session
  ends; the others watch ``controller`` and race again when it disappears.
- The controller watches ``brokers/ids``, ``brokers/shutting_down``, ``topics`` and each
  topic's znode, and also reads everything again every ``full_read_interval_s``, or less
  often when a pass takes long (``full_reads``: a safety net for a missed watch, never
  more than a tenth of the thread's time). Changes between a watch's firing and the next
  read coalesce.
- It keeps the partition states it read (``_states``). A full pass reads them all; a pass
  a watch woke reads again only what may have changed: the states of the topics new to
  the list (or whose znode changed: grown, or deleted and made again), of the partitions
  with a replica on a broker that came, went, or asked to shut down, of those a request
  names, and of those whose watched state changed (a reassignment's ISR). (Each pass used
  to read every state of the cluster: creating the topics of a 10,000-partition cluster
  one after another cost reads growing with the square of the topics.) What it kept may
  be older than ZooKeeper's in one way only, the ISR a leader changed, and every write is
  conditional on the version it read: a write from an outdated state is refused
  (StaleStateError), and the next pass reads everything. The imbalance check (which
  reads every ISR) is a full pass.
- Each pass writes what the rules of
  ``leader_election`` say must change: states for new topics, leaders for partitions
  whose leader died or is shutting down, ISRs without dead members, offline partitions
  whose last ISR member returned. All of one pass go in as few multis as fit
  (``controller_epoch.chunks``), every one fenced by the controller epoch (KAFKA-6082).
- Preferred leaders (``leader_election``): every ``leader_imbalance_check_interval_s``,
  when ``auto_leader_rebalance`` is on, the partitions of brokers that lead too few of
  those they are the preferred leader of go back to them; and the partitions an
  operator names in ``admin/preferred_replica_election`` (``preferred_election``) do at
  once, the request deleted in the same multi.
- Reassignments (``reassignment``): the moves an operator names in
  ``admin/reassign_partitions`` (``reassignment_request``) start at once, the request
  deleted in the same multi; each pass completes those whose new replicas are in sync.
- Every decision is logged at INFO on ``twinlog.controller``.

A pass that finds its write refused because a znode changed since it read it (a leader
changed its ISR meanwhile) reads again at once; a pass whose epoch check fails steps
down: this broker is no longer controller and another has decided meanwhile.

Session states (``session_gate``): while SUSPENDED nothing is started; on LOST the thread
stops for good and calls ``on_lost`` (the broker exits, crash-only).

Watch callbacks run on kazoo's one event thread: they only put a reason on the queue.

Thread rule: ``start`` and ``close`` from the owner; properties from any thread.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from types import TracebackType

from kazoo.exceptions import KazooException, NoNodeError
from kazoo.protocol.states import WatchedEvent

from twinlog.engine.base.errors import CorruptJournalError
from twinlog.engine.broker.config import BrokerConfig
from twinlog.engine.zookeeper import znodes
from twinlog.engine.zookeeper.broker_registration import live_brokers
from twinlog.engine.zookeeper.controller_epoch import (
    ControllerFencedError,
    ControllerSeat,
    Create,
    Delete,
    FencedWriter,
    Op,
    SetData,
    StaleStateError,
    chunks,
    read_controller,
    resign,
    try_to_become_controller,
)
from twinlog.engine.zookeeper.full_reads import next_full_read_s
from twinlog.engine.zookeeper.leader_election import (
    assign_replicas,
    imbalanced_partitions,
    initial_state,
    preferred_leader_state,
    settled_state,
)
from twinlog.engine.zookeeper.partition_state import (
    PartitionState,
    read_partition_state,
    read_topic_partition_states,
)
from twinlog.engine.zookeeper.preferred_election import read_election_request
from twinlog.engine.zookeeper.reassignment import (
    CANCEL,
    cancel_state,
    progress_text,
    reassignment_step,
    start_state,
)
from twinlog.engine.zookeeper.reassignment_request import read_reassignment_request
from twinlog.engine.zookeeper.session import ZooKeeperSession, ZooKeeperUnavailableError
from twinlog.engine.zookeeper.session_gate import SessionGate

log = logging.getLogger("twinlog.controller")

FULL_READ_INTERVAL_S = 5.0
POLL_S = 0.25  # the thread looks at the session state at least this often
RETRY_AFTER_S = 0.5  # after ZooKeeper did not answer
STALE_RETRY_S = 0.05  # after a write met a state changed since the read: read again soon
JOIN_S = 10.0
TOPIC_KEYS = ("partitions",)
# Wake-up reasons that call for a full pass (any other is a watched znode's path).
FULL_PASS_REASONS = frozenset({"session", "close", "watch"})
# Kafka's auto.leader.rebalance.enable, leader.imbalance.per.broker.percentage and
# leader.imbalance.check.interval.seconds: the broker settings' defaults (one source)
_BROKER_DEFAULTS = BrokerConfig()
AUTO_LEADER_REBALANCE = _BROKER_DEFAULTS.auto_leader_rebalance_enable
LEADER_IMBALANCE_PERCENTAGE = _BROKER_DEFAULTS.leader_imbalance_per_broker_percentage
LEADER_IMBALANCE_CHECK_INTERVAL_S = _BROKER_DEFAULTS.leader_imbalance_check_interval_ms / 1000


@dataclass(frozen=True)
class _Decision:
    """One partition's change, for the log once it is written."""

    topic: str
    partition: int
    old: PartitionState | None  # None: created
    new: PartitionState
    why: str = ""  # said after the change: "preferred leader (asked)", ...


@dataclass(frozen=True)
class _RequestDone:
    """An operator's request deleted: carried out."""

    kind: str  # "preferred leader election", "reassignment"
    partitions: int


class Controller:
    def __init__(
        self,
        session: ZooKeeperSession,
        broker_id: int,
        *,
        on_lost: Callable[[], None] | None = None,
        full_read_interval_s: float = FULL_READ_INTERVAL_S,
        auto_leader_rebalance: bool = AUTO_LEADER_REBALANCE,
        leader_imbalance_percentage: int = LEADER_IMBALANCE_PERCENTAGE,
        leader_imbalance_check_interval_s: float = LEADER_IMBALANCE_CHECK_INTERVAL_S,
    ) -> None:
        self.session = session
        self.broker_id = broker_id
        self.full_read_interval_s = full_read_interval_s
        self.auto_leader_rebalance = auto_leader_rebalance
        self.leader_imbalance_percentage = leader_imbalance_percentage
        self.leader_imbalance_check_interval_s = leader_imbalance_check_interval_s
        # The first check comes one interval after this broker became controller: leaders
        # moved by a failover are not moved back before their brokers caught up.
        self._imbalance_check_at_s = 0.0
        self._events: queue.SimpleQueue[str] = queue.SimpleQueue()
        self._gate = SessionGate(session, lambda: self._wake("session"), on_lost)
        self._seat: ControllerSeat | None = None
        self._stopping = threading.Event()
        self._waiting_topics: set[str] = set()  # topics logged as waiting for brokers
        # What the last pass read and wrote, for the next one woken by a watch: every
        # partition state by topic (None: a full pass is next), the live brokers' epochs
        # and those shutting down. Invariant: each state is the znode's at its version,
        # or an older one whose write will be refused (a leader changed its ISR since).
        self._states: dict[str, dict[int, PartitionState]] | None = None
        self._live_epochs: dict[int, int] = {}
        self._shutting_down: set[int] = set()
        self._passes = 0
        self._multis = 0
        self._thread = threading.Thread(
            target=self._run, name=f"twinlog-controller-{broker_id}", daemon=True
        )

    # --- the owner's side --------------------------------------------------

    def start(self) -> Controller:
        self._thread.start()
        return self

    @property
    def seat(self) -> ControllerSeat | None:
        """This broker's controller seat (its epoch), or None when it is not controller."""
        return self._seat

    @property
    def active(self) -> bool:
        return self._seat is not None

    @property
    def multis(self) -> int:
        """Multis written as controller (each holds the changes of up to 100 operations)."""
        return self._multis

    @property
    def passes(self) -> int:
        """Passes completed as controller (each read the cluster and wrote what it decided)."""
        return self._passes

    def close(self) -> None:
        """Stop the thread; a controller resigns, so another takes over without waiting
        for this session to end."""
        self._stopping.set()
        self._wake("close")
        if self._thread.is_alive():
            self._thread.join(JOIN_S)
        seat, self._seat = self._seat, None
        if seat is not None and self._gate.may_act():
            try:
                resign(self.session, seat)
            except (ZooKeeperUnavailableError, KazooException) as error:
                log.warning("controller %d: could not resign (%s)", self.broker_id, error)
        self._gate.close()

    def __enter__(self) -> Controller:
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

    def _on_watch(self, event: WatchedEvent) -> None:
        self._wake(event.path or "watch")

    # --- the controller's thread --------------------------------------------

    def _run(self) -> None:
        due = 0.0  # the next full pass, whether or not a watch fires: now
        fired: set[str] = set()  # watched znodes that changed since the last pass
        while not self._stopping.is_set():
            reasons: list[str] = []
            try:
                reasons.append(self._events.get(timeout=self._gate.idle_s(due, POLL_S)))
                while True:  # what queued meanwhile is covered by the same pass
                    reasons.append(self._events.get_nowait())
            except queue.Empty:
                pass
            for reason in reasons:
                if reason in FULL_PASS_REASONS:
                    due = 0.0
                else:
                    fired.add(reason)
            if self._stopping.is_set():
                break
            if self._gate.lost_now():
                self._step_down("its ZooKeeper session is lost")
                break
            full = time.monotonic() >= due
            if not (full or fired) or not self._gate.may_act():
                continue  # not due, or SUSPENDED: start nothing (a pass is due on CONNECTED)
            started_s = time.monotonic()
            changed, fired = fired, set()
            try:
                if full:
                    due = started_s + self.full_read_interval_s  # (if the pass fails)
                self._pass(full, changed)
                if full:
                    due = next_full_read_s(started_s, time.monotonic(), self.full_read_interval_s)
                continue
            except ControllerFencedError as error:
                self._step_down(str(error))
                due = 0.0
            except StaleStateError as error:
                log.info("controller %d: %s; reading again", self.broker_id, error)
                due = time.monotonic() + STALE_RETRY_S
            except (ZooKeeperUnavailableError, KazooException) as error:
                log.warning("controller %d: ZooKeeper: %r; retrying", self.broker_id, error)
                due = time.monotonic() + RETRY_AFTER_S
            except CorruptJournalError as error:
                log.error("controller %d: %s", self.broker_id, error)
                due = time.monotonic() + self.full_read_interval_s
            except Exception:  # a bug must not end the thread: the cluster needs a controller
                log.exception("controller %d: the pass failed", self.broker_id)
                due = time.monotonic() + RETRY_AFTER_S
            self._states = None  # after any failure the next pass reads everything

    def _step_down(self, why: str) -> None:
        if self._seat is not None:
            log.warning(
                "broker %d is no longer controller (epoch %d): %s",
                self.broker_id,
                self._seat.epoch,
                why,
            )
            seat, self._seat = self._seat, None
            if self._gate.may_act():
                try:  # a fenced controller's own znode would keep the others from racing
                    resign(self.session, seat)
                except (ZooKeeperUnavailableError, KazooException) as error:
                    log.warning("controller %d: could not resign (%s)", self.broker_id, error)

    def _pass(self, full: bool, fired: set[str]) -> None:
        """Read (everything when ``full``, else what ``fired`` and the brokers' changes
        say may have changed), decide, write."""
        if not self._hold_or_win_the_seat():
            self._states = None  # not controller: whoever is decides; read all if again
            return
        seat = self._seat
        assert seat is not None
        decisions, groups = self._decide(seat, full, fired)
        writer = FencedWriter(self.session, seat)
        for indexes in chunks(groups):
            writer.commit([op for index in indexes for op in groups[index]])
            self._multis += 1
            for index in indexes:
                decision = decisions[index]
                _log_decision(decision, seat.epoch)
                if isinstance(decision, _Decision):
                    self._remember_written(decision)
        self._passes += 1

    def _remember_written(self, decision: _Decision) -> None:
        """The state this controller just wrote, at the version ZooKeeper gave it."""
        if self._states is None:
            return
        version = 0 if decision.old is None else decision.old.version + 1
        written = replace(decision.new, version=version)
        self._states.setdefault(decision.topic, {})[decision.partition] = written

    def _hold_or_win_the_seat(self) -> bool:
        """True when this broker is controller (now, or still); the watch on
        ``controller`` is set either way."""
        client = self.session.client
        self.session.wait(client.exists_async(znodes.CONTROLLER, watch=self._on_watch))
        holder = read_controller(self.session)
        mine = holder is not None and holder[2] == client.client_id[0]
        if self._seat is not None:
            if mine and holder is not None and holder[1] == self._seat.epoch:
                return True
            self._step_down("the controller znode is gone or another broker's")
            return False
        if holder is not None:
            return False
        seat = try_to_become_controller(self.session, self.broker_id)
        if seat is None:
            return False
        self._seat = seat
        self._states = None  # a new controller reads everything first
        self._imbalance_check_at_s = time.monotonic() + self.leader_imbalance_check_interval_s
        log.info("broker %d is controller, controller epoch %d", self.broker_id, seat.epoch)
        return True

    def _decide(
        self, seat: ControllerSeat, full: bool, fired: set[str]
    ) -> tuple[list[_Decision | _RequestDone], list[list[Op]]]:
        """What to write: one group of operations per partition (a new partition's group
        holds its znodes' creates), and the decision each group carries out."""
        client = self.session.client
        live_epochs = {
            broker_id: info.broker_epoch
            for broker_id, info in live_brokers(self.session, watch=self._on_watch).items()
        }
        self.session.wait(client.ensure_path_async(znodes.SHUTTING_DOWN))
        requests = self.session.wait(
            client.get_children_async(znodes.SHUTTING_DOWN, watch=self._on_watch)
        )
        shutting_down = {int(c) for c in requests if c.isdigit()} & live_epochs.keys()
        self.session.wait(client.ensure_path_async(znodes.TOPICS))
        topics = set(
            self.session.wait(client.get_children_async(znodes.TOPICS, watch=self._on_watch))
        )
        request = read_election_request(self.session, watch=self._on_watch)
        asked = request[0] if request is not None else set()
        moves_request = read_reassignment_request(self.session, watch=self._on_watch)
        moves, throttle = (moves_request[0], moves_request[1]) if moves_request else ({}, 0)
        if self._imbalance_check_due():
            full = True  # it weighs every partition's ISR: read them all
        if full or self._states is None:
            all_states = {
                topic: read_topic_partition_states(self.session, topic) for topic in sorted(topics)
            }
            created_for = set(topics)
        else:
            all_states, created_for = self._read_changed(
                topics, fired, live_epochs, shutting_down, set(asked) | set(moves)
            )
        self._states = all_states
        self._live_epochs, self._shutting_down = live_epochs, shutting_down
        # A running reassignment completes once its leader writes the new replicas into
        # the ISR: that write wakes a pass (other ISR changes wait for the full read).
        watches = [
            client.exists_async(znodes.partition_state_path(topic, partition), self._on_watch)
            for topic, states in all_states.items()
            for partition, state in states.items()
            if state.reassigning
        ]
        for watch in watches:
            self.session.wait(watch)
        imbalanced = self._imbalanced(all_states)
        decisions: list[_Decision | _RequestDone] = []
        groups: list[list[Op]] = []
        for topic, states in all_states.items():
            for partition, state in sorted(states.items()):
                key = (topic, partition)
                settled = settled_state(state, live_epochs, shutting_down, seat.epoch)
                new, why = _moved(
                    key, settled or state, moves.get(key), throttle, live_epochs, shutting_down,
                    seat.epoch,
                )  # fmt: skip
                new = new or settled
                if new is None and (key in asked or key in imbalanced):
                    new = preferred_leader_state(state, live_epochs, shutting_down, seat.epoch)
                    why = "preferred leader (asked)" if key in asked else "preferred leader"
                if new is not None:
                    path = znodes.partition_state_path(topic, partition)
                    groups.append([SetData(path, new.encode(), state.version)])
                    decisions.append(_Decision(topic, partition, state, new, why))
            if topic not in created_for:
                continue
            for decision, group in self._creations(topic, states, live_epochs, shutting_down, seat):
                decisions.append(decision)
                groups.append(group)
        # Requests are carried out with the last of these writes (what could not be done
        # is said to the requester by the states it reads after).
        if request is not None:
            groups.append([Delete(znodes.PREFERRED_ELECTION, request[1])])
            decisions.append(_RequestDone("preferred leader election", len(asked)))
        if moves_request is not None:
            groups.append([Delete(znodes.REASSIGN_PARTITIONS, moves_request[2])])
            decisions.append(_RequestDone("reassignment", len(moves)))
        return decisions, groups

    def _read_changed(
        self,
        topics: set[str],
        fired: set[str],
        live_epochs: dict[int, int],
        shutting_down: set[int],
        named: set[tuple[str, int]],
    ) -> tuple[dict[str, dict[int, PartitionState]], set[str]]:
        """The states kept from the last pass with what may have changed since read
        again (``named``: the partitions a request names); and the topics whose missing
        states to create (new, changed, or waiting for brokers)."""
        assert self._states is not None
        kept = self._states
        states = {topic: kept[topic] for topic in sorted(topics) if topic in kept}
        changed_topics = set(topics) - kept.keys()
        stale: set[tuple[str, int]] = set(named)
        for path in fired:
            parts = path.strip("/").split("/")
            if "/" + parts[0] != znodes.TOPICS or len(parts) < 2:
                continue  # brokers, requests, the controller: read at every pass
            if len(parts) == 2:
                changed_topics.add(parts[1])  # its znode: grown, or deleted and made again
            elif len(parts) == 5 and parts[3].isdigit():
                stale.add((parts[1], int(parts[3])))  # a watched state
        brokers = {
            broker_id
            for broker_id in live_epochs.keys() | self._live_epochs.keys()
            if live_epochs.get(broker_id) != self._live_epochs.get(broker_id)
        } | (shutting_down ^ self._shutting_down)
        if brokers:
            stale.update(
                (topic, partition)
                for topic, by_partition in states.items()
                for partition, state in by_partition.items()
                if brokers.intersection(state.replicas)
            )
        for topic in sorted(changed_topics & topics):
            states[topic] = read_topic_partition_states(self.session, topic)
        for topic, partition in sorted(stale):
            if topic in changed_topics or topic not in topics:
                continue  # read whole above, or gone
            state = read_partition_state(self.session, topic, partition)
            by_partition = states.setdefault(topic, {})
            if state is None:
                by_partition.pop(partition, None)
            else:
                by_partition[partition] = state
        created_for = (changed_topics | self._waiting_topics) & topics
        if brokers:
            created_for |= {topic for topic in topics if not states.get(topic)}
        return states, created_for

    def _imbalance_check_due(self) -> bool:
        return self.auto_leader_rebalance and time.monotonic() >= self._imbalance_check_at_s

    def _imbalanced(self, all_states: dict[str, dict[int, PartitionState]]) -> set[tuple[str, int]]:
        """The partitions to move back to their preferred leaders now (none until the
        check is due, or with ``auto_leader_rebalance`` off)."""
        now_s = time.monotonic()
        if not self._imbalance_check_due():
            return set()
        self._imbalance_check_at_s = now_s + self.leader_imbalance_check_interval_s
        return imbalanced_partitions(
            (
                (topic, partition, state)
                for topic, states in all_states.items()
                for partition, state in states.items()
            ),
            self.leader_imbalance_percentage,
        )

    def _creations(
        self,
        topic: str,
        states: dict[int, PartitionState],
        live_epochs: dict[int, int],
        shutting_down: set[int],
        seat: ControllerSeat,
    ) -> list[tuple[_Decision, list[Op]]]:
        """The state znodes ``topic`` lacks (all of them for a new topic)."""
        path = znodes.topic_path(topic)
        try:
            # Watched: a topic grown, or deleted and made again, wakes a pass that reads it.
            data, _stat = self.session.wait(self.session.client.get_async(path, self._on_watch))
        except NoNodeError:
            return []  # deleted since the listing
        value = znodes.decode(path, data, TOPIC_KEYS)
        partitions, factor = value["partitions"], value.get("replication_factor", 1)
        if not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in (partitions, factor)
        ):
            raise CorruptJournalError(
                f"ZooKeeper znode {path}: partitions {partitions!r} and replication_factor "
                f"{factor!r} must be integers 1 or more"
            )
        missing = [partition for partition in range(partitions) if partition not in states]
        if not missing:
            return []
        if factor > len(live_epochs):
            if topic not in self._waiting_topics:
                self._waiting_topics.add(topic)
                log.warning(
                    "topic %s: replication factor %d but %d live brokers; its partitions are "
                    "created when enough brokers are registered",
                    topic,
                    factor,
                    len(live_epochs),
                )
            return []
        self._waiting_topics.discard(topic)
        assignment = assign_replicas(topic, partitions, factor, list(live_epochs))
        parent_missing = not states and (
            self.session.wait(self.session.client.exists_async(znodes.partitions_path(topic)))
            is None
        )
        created: list[tuple[_Decision, list[Op]]] = []
        for partition in missing:
            state = initial_state(assignment[partition], live_epochs, seat.epoch)
            state = settled_state(state, live_epochs, shutting_down, seat.epoch) or state
            group: list[Op] = []
            if parent_missing:
                group.append(Create(znodes.partitions_path(topic), b""))
                parent_missing = False
            group.append(Create(znodes.partition_path(topic, partition), b""))
            group.append(Create(znodes.partition_state_path(topic, partition), state.encode()))
            created.append((_Decision(topic, partition, None, state), group))
        return created


def _moved(
    key: tuple[str, int],
    state: PartitionState,
    target: tuple[int, ...] | None,
    throttle_bytes_per_s: int,
    live_epochs: dict[int, int],
    shutting_down: set[int],
    controller_epoch: int,
) -> tuple[PartitionState | None, str]:
    """``state`` as a reassignment asked (``target``; CANCEL) or running changes it, and
    why; (None, "") when it does not."""
    where = f"{key[0]}-{key[1]}"
    if target == CANCEL:
        new = cancel_state(state, shutting_down, controller_epoch)
        if new is None and state.reassigning:
            log.warning(
                "%s: its reassignment is not cancelled: no original replica %s is in the ISR "
                "%s; it runs on",
                where,
                list(state.original),
                list(state.isr_ids),
            )
        return new, "reassignment cancelled" if new else ""
    if target is not None:
        try:
            new = start_state(state, target, throttle_bytes_per_s, controller_epoch)
        except ValueError as error:  # checked by the requester; a hand-written znode
            log.error("%s: reassignment refused: %s", where, error)
            return None, ""
        return new, f"reassignment started: {progress_text(new)}" if new else ""
    new = reassignment_step(state, live_epochs, shutting_down, controller_epoch)
    return new, "reassignment completed" if new else ""


def _log_decision(decision: _Decision | _RequestDone, controller_epoch: int) -> None:
    if isinstance(decision, _RequestDone):
        log.info(
            "%s asked for %d partitions carried out (controller epoch %d)",
            decision.kind,
            decision.partitions,
            controller_epoch,
        )
        return
    new, old = decision.new, decision.old
    if old is None:
        log.info(
            "partition %s-%d created: replicas %s, leader %d, leader_epoch %d, isr %s "
            "(controller epoch %d)",
            decision.topic,
            decision.partition,
            list(new.replicas),
            new.leader,
            new.leader_epoch,
            _isr_text(new),
            controller_epoch,
        )
        return
    replicas = (
        f", replicas {list(old.replicas)} -> {list(new.replicas)}"
        if old.replicas != new.replicas
        else ""
    )
    log.info(
        "partition %s-%d: leader %d -> %d, leader_epoch %d -> %d, isr %s -> %s%s "
        "(controller epoch %d%s)",
        decision.topic,
        decision.partition,
        old.leader,
        new.leader,
        old.leader_epoch,
        new.leader_epoch,
        _isr_text(old),
        _isr_text(new),
        replicas,
        controller_epoch,
        f"; {decision.why}" if decision.why else "",
    )


def _isr_text(state: PartitionState) -> str:
    """``[1@4294967300, 2@4294967310]``: broker id @ broker epoch."""
    return "[" + ", ".join(f"{m.broker_id}@{m.broker_epoch}" for m in state.isr) + "]"
