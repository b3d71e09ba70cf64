"""A randomized nemesis over a ``FaultCluster`` (CLUSTER.md §4.2, §4.3).

    nemesis = Nemesis(cluster, seed)
    summary = nemesis.run(faults=16)            # or minutes=N: until N minutes passed
    print(summary.render()); assert not summary.anomalies_found()

Workload, all at once: ``WRITERS`` transactional producers (``TransactionalWriter``, unique
values, 1..PARTITIONS partitions per transaction, a fifth of them aborted) on a topic of
PARTITIONS partitions, replication factor 3; one idempotent ``acks=all`` producer on a
one-partition topic of its own (``AckedProducer``); a consumer tailing each topic's
partition 0, recording (offset, value).

Faults, one at a time, drawn from ``random.Random(seed)`` (the seed is printed), each
undone before the next (``FaultCluster.heal``: restarts what died):

    kill         SIGKILL a broker (the coordinator's, a leader's, any), restart it
    pause        SIGSTOP a broker until ZooKeeper expires its session and 0-2 s more,
                 SIGCONT (it exits on the lost session)
    cut-inbound  hold every connection into a broker (brokers and clients) for 1-5 s
    cut-one-way  the same, one direction only: requests lost, or only their answers
    cut-client   hold the clients' connections into a broker only (brokers still reach
                 it), one way or both, for 1-5 s
    cut-zk       hold a broker's ZooKeeper link past its session (it exits)
    crash-step   arm one of CRASH_POINTS (a coordinator record appended but not yet
                 replicated, after PREPARE, between two partitions' APPLYs, before
                 COMMITTED) on the coordinator's broker: it SIGKILLs itself there
    zk-restart   SIGKILL ZooKeeper and start it again (when the run is given it): each
                 broker keeps its session or exits on its loss and is restarted
    forge        (a secured cluster) every forged internal call of ``cluster_attack``
                 at every broker's client port and inter-broker listener, while every
                 broker runs: each must be refused with the status its door gives
    kill-restart SIGKILL a broker and start it again at once, as a supervisor without a
                 delay: it waits out its own registration's session, then rejoins
    elect-preferred  every partition led by its first replica again where that one is
                 in sync (``twinlog cluster elect-leaders --preferred``): leaderships,
                 the coordinator's too, move between live brokers under the workload
    reassign     one partition (of the transactional topic, or the coordinator's journal
                 partition) moved off one of its brokers, the leader among them as often
                 as not, and back once that completed: the broker left drops its copy,
                 then copies it again from nothing as a new replica and rejoins the ISR.
                 One time in three the move back is throttled and cancelled half-way
                 (the new copy dropped again), then asked for once more, unthrottled

(ZooKeeper paused, which stops every broker's clock at once, is in
``test_f21_zookeeper_faults.py``, not here.)

The cluster is secured (``cluster_faults``): the workload's clients act as principals
with narrow grants (``cluster_workload``), and, besides the ``forge`` fault, an attacker
thread sends a few forged internal calls every second throughout (``BackgroundAttacker``):
whatever state the brokers are in, none may be answered. Every NotCoordinatorError an
honest client meets is timed (the transactional producers' routing log, the workers'
errors): one outside a fault that moved the coordinator (its journal partition's leader
epoch grew, or the fault stopped the coordinator's broker or restarted ZooKeeper), or
more than ``MOVE_GRACE_S`` after it, is a ``stray-not-coordinator``.

Then quiesce (heal, stop the workload, wait for full ISRs) and check, counting anomalies
by class rather than stopping at the first: lost, aborted-read, duplicate, torn,
non-contiguous, unknown-partial (``cluster_checks.transaction_anomalies``),
forged-internal (a forged call answered, or a ``forge`` call refused with a status its
door does not give), stray-not-coordinator, plain-history
(an acknowledged plain write lost or doubled, a consumer's read undone or its offsets
non-monotonic: ``check_history``), replica-divergence (``check_replicas_agree`` on every
partition, the journal partition included), inconsistent-read (a tailing consumer saw an
(offset, value) of the transactional topic the final log does not hold there).

Thread rule: the test's thread.
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from cluster_attack import BackgroundAttacker, ForgeryTally, InternalAttacker
from cluster_checks import (
    check_history,
    check_replicas_agree,
    read_topic,
    transaction_anomalies,
)
from cluster_faults import (
    BROKER_IDS,
    CRASH_POINTS,
    EXPIRY_S,
    SESSION_TIMEOUT_MS,
    BrokerProcess,
    FaultCluster,
    wait_until,
)
from cluster_security import OPERATOR
from cluster_workload import (
    AckedProducer,
    BackgroundProducer,
    TailingConsumer,
    TransactionalWriter,
)
from tcp_proxy import BOTH, DOWN, UP

from twinlog.engine.base.errors import BrokerUnavailableError, NoReassignmentInProgressError
from twinlog.engine.broker.internal_topics import TXN_JOURNAL_TOPIC
from twinlog.rpc.cli.local_zookeeper import LocalZooKeeper
from twinlog.rpc.client import Admin

SEED_VARIABLE = "TWINLOG_NEMESIS_SEED"
MINUTES_VARIABLE = "TWINLOG_NEMESIS_MINUTES"
FAULTS_VARIABLE = "TWINLOG_NEMESIS_FAULTS"
PARTITIONS = 3
WRITERS = 3
ABORT_RATIO = 0.2
KINDS = {
    "kill": 3,
    "pause": 1,
    "cut-inbound": 3,
    "cut-one-way": 2,
    "cut-client": 2,
    "cut-zk": 1,
    "crash-step": 2,
    "zk-restart": 1,
    "forge": 1,
    "kill-restart": 1,  # SIGKILL, then started again at once: it waits out its session
    "elect-preferred": 1,  # every leadership back to its first replica, where in sync
    "reassign": 1,  # a partition moved off a broker and back (a copy dropped, then remade)
}
# After a fault that moved the coordinator, clients may still meet NotCoordinatorError at
# the old one for this long: until each has made its next call there (a paused call's
# timeout, a writer's reconnection backoff) and found the new one.
MOVE_GRACE_S = 20.0
# Faults that stop their victim broker for a while (its partitions' leaders move, or are
# offline until it returns).
STOPS_THE_VICTIM = ("kill", "pause", "cut-zk", "crash-step", "kill-restart")
CLIENT_ROUTING_LOGGER = "twinlog.client"  # rpc/client/cluster.py logs there
NOT_COORDINATOR = "NotCoordinatorError"
# A restarted ZooKeeper expires, a session timeout after it serves again, the restored
# sessions of brokers that did not reconnect (as test_f21_zookeeper_faults.py waits).
RESTORED_EXPIRY_S = SESSION_TIMEOUT_MS / 1000 + 1.0
RECONNECTED = "Zookeeper connection established"  # kazoo's line on each (re)connection


def _log_bytes(broker: BrokerProcess) -> int:
    return broker.log_path.stat().st_size if broker.log_path.exists() else 0


def _log_since(broker: BrokerProcess, offset: int) -> str:
    with broker.log_path.open("rb") as log_file:
        log_file.seek(offset)
        return log_file.read().decode(errors="replace")


CRASH_STEP_WAIT_S = 10.0  # the coordinator's next commit comes well within this
# A committed transaction missing from the final read is read again for this long: its copy
# is retried at least every second (RETRIABLE_RETRY_S_MAX) once its partition has a leader.
COMPLETION_WAIT_S = 30.0
ELECT_TIMEOUT_MS = 20_000
REASSIGN_WAIT_S = 60.0  # a move of the workload's small partitions completes well within
CRAWL_BYTES_PER_S = 1024  # a move this slow is still copying when it is cancelled


def seed_from_environment() -> int:
    text = os.environ.get(SEED_VARIABLE)
    return int(text) if text else random.SystemRandom().randrange(1 << 32)


@dataclass
class Summary:
    seed: int
    minutes: float = 0.0
    faults: Counter[str] = field(default_factory=Counter)
    leader_changes: int = 0
    coordinator_changes: int = 0
    transactions: Counter[str] = field(default_factory=Counter)
    plain_acknowledged: int = 0
    anomalies: dict[str, list[str]] = field(default_factory=dict)
    # committed transactions missing at the first final read, found whole in a later one
    late: list[str] = field(default_factory=list)
    forgeries: ForgeryTally | None = None  # the forge faults' strict rounds
    background_forgeries: ForgeryTally | None = None  # the attacker thread's
    not_coordinator_in_moves: int = 0

    def anomalies_found(self) -> dict[str, list[str]]:
        return {kind: items for kind, items in self.anomalies.items() if items}

    def render(self) -> str:
        lines = [
            f"nemesis: seed {self.seed} ({SEED_VARIABLE}={self.seed} repeats it), "
            f"{self.minutes:.1f} minutes, {sum(self.faults.values())} faults",
            f"  faults by kind: {dict(sorted(self.faults.items()))}",
            f"  leader changes: {self.leader_changes}, coordinator changes: "
            f"{self.coordinator_changes}",
            f"  transactions by outcome: {dict(sorted(self.transactions.items()))}; "
            f"plain writes acknowledged: {self.plain_acknowledged}",
            f"  committed but readable only after the first final read: {len(self.late)}"
            + (f" {self.late[:5]}" if self.late else ""),
            "  forge faults: "
            + (self.forgeries.render() if self.forgeries else "none (an open cluster)"),
            "  forgeries across the faults: "
            + (
                self.background_forgeries.render()
                if self.background_forgeries
                else "none (an open cluster)"
            ),
            f"  honest clients' NotCoordinatorErrors: {self.not_coordinator_in_moves} while "
            f"the coordinator moved, "
            f"{len(self.anomalies.get('stray-not-coordinator', []))} outside any move",
            "  anomalies by class: "
            + ", ".join(f"{kind} {len(items)}" for kind, items in sorted(self.anomalies.items())),
        ]
        for kind, items in self.anomalies_found().items():
            lines.append(f"  {kind}: {items[:5]}")
        return "\n".join(lines)


class Nemesis:
    def __init__(
        self,
        cluster: FaultCluster,
        seed: int,
        name: str,
        zookeeper: LocalZooKeeper | None = None,
    ) -> None:
        """``zookeeper``: the server the cluster uses, for zk-restart (None: no such fault)."""
        self.cluster = cluster
        self.zookeeper = zookeeper
        self.rng = random.Random(seed)
        self.summary = Summary(seed)
        self.topic = f"{name}-txn"
        self.plain_topic = f"{name}-plain"
        self.name = name
        self.attacker: InternalAttacker | None = None
        # (start, end, the coordinator moved) of each fault, monotonic seconds
        self.windows: list[tuple[float, float, bool]] = []
        self.routing = NotCoordinatorLog()

    def _epochs(self) -> dict[tuple[str, int], int]:
        epochs = {}
        for topic, partition in [(self.topic, p) for p in range(PARTITIONS)] + [
            (self.plain_topic, 0),
            (TXN_JOURNAL_TOPIC, 0),
        ]:
            state = self.cluster.state(topic, partition)
            epochs[(topic, partition)] = -1 if state is None else state.leader_epoch
        return epochs

    # --- faults ----------------------------------------------------------------------

    def _fault(self, kind: str) -> None:
        dead = {
            b: broker.exit_status()
            for b, broker in self.cluster.brokers.items()
            if not broker.alive
        }
        if dead:
            # The last heal saw every broker registered; one exited since (a session the
            # last fault's ZooKeeper restart expired late, on a loaded machine). Said, and
            # restarted, so that this fault strikes the cluster it means to. From the last
            # heal to now counts as a fault window in which the coordinator may have moved
            # (clients' NotCoordinatorErrors then are no anomaly).
            print(f"nemesis: brokers {dead} (id: exit status) exited after the last heal")
            since = self.windows[-1][1] if self.windows else 0.0
            self.cluster.heal()
            self.windows.append((since, time.monotonic(), True))
        started = time.monotonic()
        epoch = self._journal_epoch()
        coordinator = self._journal_leader()
        victim: int | None = None
        try:
            victim = self._do_fault(kind)
        finally:
            # The coordinator moved, or was down for a while: its journal partition's
            # leader epoch grew, or the fault stopped the coordinator's broker or every
            # broker's ZooKeeper (its partition may come back to the same broker at the
            # same epoch, yet clients found no coordinator meanwhile).
            moved = (
                self._journal_epoch() != epoch
                or kind == "zk-restart"
                or (kind in STOPS_THE_VICTIM and victim == coordinator)
            )
            self.windows.append((started, time.monotonic(), moved))

    def _move(self, admin: Admin, key: tuple[str, int], target: tuple[int, ...]) -> None:
        """Move ``key`` to ``target`` and wait until it completed."""
        (result,) = admin.reassign_partitions({key: target})
        assert result.error is None, result
        self.cluster.wait_state(
            key[0],
            lambda s: s.replicas == target and not s.reassigning,
            f"moved to {list(target)}",
            REASSIGN_WAIT_S,
            key[1],
        )

    def _journal_leader(self) -> int:
        state = self.cluster.state(TXN_JOURNAL_TOPIC, 0)
        return -1 if state is None else state.leader

    def _journal_epoch(self) -> int:
        state = self.cluster.state(TXN_JOURNAL_TOPIC, 0)
        return -1 if state is None else state.leader_epoch

    def _do_fault(self, kind: str) -> int | None:
        """Do one fault and heal it; the broker it struck, if it struck one."""
        cluster, rng = self.cluster, self.rng
        victim = cluster.brokers[rng.choice(BROKER_IDS)]
        if kind == "forge":
            # Right after a heal every broker runs and is registered: a strict round.
            assert self.attacker is not None
            self.attacker.round(rng, strict=True)
        elif kind == "kill":
            if rng.random() < 0.5:  # the coordinator's broker half the time
                victim = cluster.brokers[cluster.coordinator().leader]
            victim.kill()
        elif kind == "pause":
            victim.pause()
            # Past its session: until ZooKeeper has expired it (a fixed sleep could end
            # first on a busy machine, and the broker would run on), then 0-2 s more.
            wait_until(
                lambda: victim.broker_id not in cluster.registered(),
                "the paused broker's session expired",
                EXPIRY_S,
            )
            time.sleep(rng.uniform(0, 2))
            victim.resume()
            wait_until(lambda: not victim.alive, "the resumed broker exits", EXPIRY_S)
        elif kind in ("cut-inbound", "cut-one-way", "cut-client"):
            link = victim.client_link if kind == "cut-client" else victim.inbound_link
            directions = {"cut-inbound": [BOTH], "cut-one-way": [UP, DOWN]}.get(
                kind, [BOTH, UP, DOWN]
            )
            link.hold(rng.choice(directions))
            time.sleep(rng.uniform(1, 5))
            link.release()
        elif kind == "kill-restart":
            victim.kill()
            cluster.restart(victim.broker_id, at_once=True)
        elif kind == "elect-preferred":
            # Through any broker; partitions whose first replica is out of sync stay. An
            # operator's tool retries while no broker answers (all restarting at once,
            # seed 2102): the harness's step, not a finding.
            def elect() -> bool:
                try:
                    with Admin(cluster.bootstrap, **cluster.client_arguments(OPERATOR)) as admin:
                        admin.elect_preferred_leaders(timeout_ms=ELECT_TIMEOUT_MS)
                except BrokerUnavailableError as error:
                    print(f"nemesis: elect-preferred: no broker answered ({error}); again")
                    return False
                return True

            wait_until(
                elect,
                "a broker to take the preferred elections",
                ELECT_TIMEOUT_MS / 1000 + EXPIRY_S,
            )
        elif kind == "reassign":
            choices = [(self.topic, p) for p in range(PARTITIONS)] + [(TXN_JOURNAL_TOPIC, 0)]
            topic, partition = rng.choice(choices)
            state = cluster.state(topic, partition)
            assert state is not None and not state.reassigning, state
            original = state.replicas
            leaving = state.leader if rng.random() < 0.5 else rng.choice(original)
            victim = cluster.brokers[leaving]
            smaller = tuple(r for r in original if r != leaving)
            key = (topic, partition)
            moved_back = False
            with Admin(cluster.bootstrap, **cluster.client_arguments(OPERATOR)) as admin:
                self._move(admin, key, smaller)
                if rng.random() < 1 / 3:  # throttled to a crawl, then cancelled half-way
                    (result,) = admin.reassign_partitions({key: original}, CRAWL_BYTES_PER_S)
                    assert result.error is None, result
                    cluster.wait_state(topic, lambda s: s.reassigning, "moving", 10, partition)
                    time.sleep(rng.uniform(0, 2))
                    (result,) = admin.reassign_partitions({key: None})
                    if isinstance(result.error, NoReassignmentInProgressError):
                        # The move back completed first: the returning broker had kept
                        # enough of the partition that the crawl was enough (seed 2104).
                        now = cluster.state(topic, partition)
                        assert now is not None and now.replicas == original, now
                        assert not now.reassigning, now
                        moved_back = True
                        print(f"nemesis: the cancelled move of {topic}-{partition} completed")
                    else:
                        assert result.error is None, result
                        cluster.wait_state(
                            topic,
                            lambda s: s.replicas == smaller and not s.reassigning,
                            "cancelled",
                            REASSIGN_WAIT_S,
                            partition,
                        )
                if not moved_back:
                    self._move(admin, key, original)
        elif kind == "zk-restart":
            assert self.zookeeper is not None
            logs_before = {b: _log_bytes(broker) for b, broker in cluster.brokers.items()}
            self.zookeeper.kill()
            self.zookeeper.restart()
            time.sleep(RESTORED_EXPIRY_S)  # every broker kept its session or exits now
            # On a loaded machine a broker may learn its session's end later (the server
            # took seconds to load): wait until each has reconnected or exited, so none
            # exits after the heal below, under the next fault's feet.
            wait_until(
                lambda: all(
                    not broker.alive or RECONNECTED in _log_since(broker, logs_before[b])
                    for b, broker in cluster.brokers.items()
                ),
                "every broker reconnected to the restarted ZooKeeper, or exited",
                EXPIRY_S,
            )
        elif kind == "cut-zk":
            assert victim.zookeeper_link is not None
            victim.zookeeper_link.hold()
            wait_until(lambda: not victim.alive, "the cut broker exits", 2 * EXPIRY_S)
            victim.zookeeper_link.release()
        elif kind == "crash-step":
            victim = cluster.brokers[cluster.coordinator().leader]
            victim.arm_crash(rng.choice(CRASH_POINTS))
            try:
                wait_until(lambda: not victim.alive, "", CRASH_STEP_WAIT_S)
            except AssertionError:
                pass  # no commit reached the step in time: it counts as a fault armed
            victim.disarm_crashes()
        else:
            raise AssertionError(kind)
        self.summary.faults[kind] += 1
        cluster.heal()
        return None if kind in ("forge", "zk-restart", "elect-preferred") else victim.broker_id

    # --- the run ---------------------------------------------------------------------

    def run(self, faults: int = 16, minutes: float | None = None) -> Summary:
        cluster, rng = self.cluster, self.rng
        cluster.create_topic(self.topic, PARTITIONS)
        cluster.create_topic(self.plain_topic)
        cluster.wait_in_sync(TXN_JOURNAL_TOPIC)
        before = self._epochs()
        writers = [
            TransactionalWriter(
                cluster,
                self.topic,
                PARTITIONS,
                f"{self.topic}-w{n}",
                abort_ratio=ABORT_RATIO,
                rng=random.Random(rng.random()),
            )
            for n in range(WRITERS)
        ]
        plain = AckedProducer(cluster, self.plain_topic, f"{self.plain_topic}-v")
        background: InternalAttacker | None = None
        if cluster.security is not None:
            background = InternalAttacker(
                cluster, cluster.root / f"{self.name}-attacker", self.topic, PARTITIONS
            )
            self.attacker = InternalAttacker(
                cluster, cluster.root, self.topic, PARTITIONS, background.credentials
            )
            for one in (background, self.attacker):
                one.aim_at_producer(plain.identity.producer_id, plain.identity.producer_generation)
        started = time.monotonic()
        chosen = {
            k: w
            for k, w in KINDS.items()
            if (k != "zk-restart" or self.zookeeper) and (k != "forge" or self.attacker)
        }
        kinds, weights = list(chosen), list(chosen.values())
        first_round = rng.sample(kinds, len(kinds))
        with (
            self.routing,
            TailingConsumer(cluster, self.plain_topic) as plain_consumer,
            TailingConsumer(cluster, self.topic) as txn_consumer,
            BackgroundProducer(plain),
            BackgroundAttacker(background, rng.randrange(1 << 30))
            if background is not None
            else _nothing(),
        ):
            for writer in writers:
                writer.start()
            try:
                done = 0
                while (
                    time.monotonic() - started < minutes * 60
                    if minutes is not None
                    else done < faults
                ):
                    time.sleep(rng.uniform(0.2, 1.5))  # the workload runs between faults
                    # Every kind once, in a random order, then by weight: a short run
                    # still meets each kind.
                    kind = first_round[done] if done < len(first_round) else None
                    kind = kind or rng.choices(kinds, weights)[0]
                    print(f"nemesis {time.monotonic() - started:6.1f} s: fault {done + 1}: {kind}")
                    self._fault(kind)
                    done += 1
                cluster.heal()
                time.sleep(2.0)  # a few transactions on the healed cluster
            finally:
                for writer in writers:
                    writer.stop()
        self.summary.minutes = (time.monotonic() - started) / 60
        self._check(writers, plain, plain_consumer, txn_consumer, before)
        self._check_security(writers, plain, plain_consumer, txn_consumer, background)
        return self.summary

    def _check_security(
        self,
        writers: list[TransactionalWriter],
        plain: AckedProducer,
        plain_consumer: TailingConsumer,
        txn_consumer: TailingConsumer,
        background: InternalAttacker | None,
    ) -> None:
        """Forgeries answered (or, in a strict round, refused with a status their door
        does not give); honest NotCoordinatorErrors outside the coordinator's moves."""
        summary = self.summary
        forged: list[str] = []
        for attacker in (self.attacker, background):
            if attacker is not None:
                forged += attacker.tally.accepted + attacker.tally.unexpected
        summary.anomalies["forged-internal"] = forged
        summary.forgeries = None if self.attacker is None else self.attacker.tally
        summary.background_forgeries = None if background is None else background.tally
        met = [(at, f"routing: {where}") for at, where in self.routing.seen]
        for name, times in (
            [(w.tag, w.error_times) for w in writers]
            + [("plain producer", plain.error_times)]
            + [("plain consumer", plain_consumer.error_times)]
            + [("txn consumer", txn_consumer.error_times)]
        ):
            met += [(at, name) for at, error in times if error == NOT_COORDINATOR]
        in_moves = [
            (at, who)
            for at, who in met
            if any(
                moved and start <= at <= end + MOVE_GRACE_S for start, end, moved in self.windows
            )
        ]
        summary.not_coordinator_in_moves = len(in_moves)
        first = self.windows[0][0] if self.windows else 0.0
        summary.anomalies["stray-not-coordinator"] = [
            f"{at - first:.1f} s after the first fault: {who}"
            for at, who in sorted(met)
            if (at, who) not in in_moves
        ]

    def _check(
        self,
        writers: list[TransactionalWriter],
        plain: AckedProducer,
        plain_consumer: TailingConsumer,
        txn_consumer: TailingConsumer,
        before: dict[tuple[str, int], int],
    ) -> None:
        cluster, summary = self.cluster, self.summary
        anomalies: dict[str, list[str]] = {
            "replica-divergence": [],
            "plain-history": [],
            "inconsistent-read": [],
        }
        for topic, partition in before:
            try:
                committed = check_replicas_agree(cluster, topic, partition=partition)
            except AssertionError as error:
                anomalies["replica-divergence"].append(str(error)[:500])
                continue
            if topic == self.plain_topic:
                try:
                    check_history(committed, [plain], [plain_consumer])
                except AssertionError as error:
                    anomalies["plain-history"].append(str(error)[:500])
        read = read_topic(cluster, self.topic, PARTITIONS)
        found = transaction_anomalies(read, writers)
        # A commit is acknowledged once decided; its copy follows (retried while a leader
        # moves). What is missing now is read again until COMPLETION_WAIT_S has passed:
        # only what is still missing then is lost or torn; the rest was late.
        missing_first = _missing_tags(found)
        deadline_s = time.monotonic() + COMPLETION_WAIT_S
        while _missing_tags(found) and time.monotonic() < deadline_s:
            time.sleep(1.0)
            read = read_topic(cluster, self.topic, PARTITIONS)
            found = transaction_anomalies(read, writers)
        summary.late = sorted(missing_first - _missing_tags(found))
        anomalies.update(found)
        final = dict(read[0])
        offsets = [offset for offset, _value in txn_consumer.seen]
        if offsets != sorted(set(offsets)):
            anomalies["inconsistent-read"].append("partition 0 offsets not monotonic")
        anomalies["inconsistent-read"] += [
            f"offset {offset}: saw {value!r}, now {final.get(offset)!r}"
            for offset, value in txn_consumer.seen
            if final.get(offset) != value
        ]
        summary.anomalies = anomalies
        after = self._epochs()
        summary.leader_changes = sum(
            after[key] - before[key] for key in before if key[0] != TXN_JOURNAL_TOPIC
        )
        journal = (TXN_JOURNAL_TOPIC, 0)
        summary.coordinator_changes = after[journal] - before[journal]
        summary.transactions = Counter(txn.outcome for w in writers for txn in w.transactions)
        summary.plain_acknowledged = len(plain.acknowledged)


def _missing_tags(anomalies: dict[str, list[str]]) -> set[str]:
    """Tags of the committed transactions missing, whole or in part, from a read."""
    return {item.split(":")[0] for kind in ("lost", "torn") for item in anomalies[kind]}


class NotCoordinatorLog(logging.Handler):
    """Times every NotCoordinatorError the in-process clients' routing met (``rpc/client/
    cluster.py`` logs each at DEBUG before it finds the coordinator again), while the
    ``with`` lasts. Thread rule: ``emit`` from any client thread; ``seen`` read after."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.seen: list[tuple[float, str]] = []  # (monotonic time, the call's key and broker)
        self._logger = logging.getLogger(CLIENT_ROUTING_LOGGER)
        self._level = self._logger.level
        self._effective = self._logger.getEffectiveLevel()
        self._propagate = self._logger.propagate

    def emit(self, record: logging.LogRecord) -> None:
        arguments = record.args if isinstance(record.args, tuple) else ()
        if str(record.msg).startswith("coordinator of") and NOT_COORDINATOR in arguments:
            self.seen.append((time.monotonic(), " ".join(str(a) for a in arguments[:3])))
        # What the logger let through before goes on as before; the DEBUG records it lets
        # through only for this count go no further (a long run would pile them up).
        if record.levelno >= self._effective and self._logger.parent is not None:
            self._logger.parent.handle(record)

    def __enter__(self) -> NotCoordinatorLog:
        self._level = self._logger.level
        self._effective = self._logger.getEffectiveLevel()
        self._propagate = self._logger.propagate
        self._logger.setLevel(logging.DEBUG)
        self._logger.propagate = False
        self._logger.addHandler(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._logger.removeHandler(self)
        self._logger.setLevel(self._level)
        self._logger.propagate = self._propagate


@contextmanager
def _nothing() -> Iterator[None]:
    yield None
