"""Transaction coordinator failover, timed from a SIGKILL to the first committed transaction.

Coordinator N is the leader of partition N of ``__txn_journal`` (docs/replication.md,
"Transaction coordinators in a cluster"). The phase chooses the first journal partition
whose leader is not the controller (so the figure is a coordinator failover, not a
controller failover too), opens K transactions there that stay open
(``open_transactions``), starts a producer that commits small transactions in a loop
(``commit_loop``: one record to each of the topic's three partitions, on the bootstrap
list), and SIGKILLs the broker leading ``__txn_journal-N``. Split by what ZooKeeper and
a probe show (polled every 10 ms):

    session expiry       kill -> the broker's registration (ephemeral znode) is gone
    controller           -> a new leader of __txn_journal-N in its state znode
    coordinator load     -> the new leader's first answer for coordinator N that is
                            not CoordinatorLoadInProgressError / NotCoordinatorError
                            (promotion barrier, replay of the replicated journal, redo
                            of prepared commits); a begin for a producer id nobody has,
                            sent every 10 ms, or the client's commit if that came first
    client commit        -> the looping producer's first commit answered (it follows
                            the coordinator with FindCoordinator, pausing up to 1 s
                            between attempts, and its records' partitions fail over too)

Then: how many of the K transactions the new coordinator's broker still lists as
ONGOING, a sample of them committed through the new coordinator, the others aborted
(admin abort), and the killed broker started again until every partition is whole and
every coordinator answers. The new leader's log adds its own view of the load: when
it learned it leads, and how long the replay took (``load_log``).
"""

from __future__ import annotations

import itertools
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from bench.cluster.cluster import BenchCluster
from bench.cluster.commit_loop import CommitLoop
from bench.cluster.load_log import coordinator_load_from_log
from bench.cluster.open_transactions import OPEN_TRANSACTION_TIMEOUT_MS, OpenTransactions
from bench.cluster.settings import BenchSettings
from bench.cluster.timeline import Timeline
from bench.cluster.waiting import wait_for
from twinlog.engine.base.errors import (
    BrokerUnavailableError,
    CoordinatorLoadInProgressError,
    NotCoordinatorError,
    RequestTimedOutError,
    TwinlogError,
)
from twinlog.engine.broker.internal_topics import (
    TXN_JOURNAL_TOPIC,
    coordinator_partition_of_transactional_id,
)
from twinlog.rpc.client.connection_options import ConnectionOptions
from twinlog.rpc.client.remote import RemoteBroker

TOPIC = "bench-coordinator-failover"
PARTITIONS = 3
COMMITS_BEFORE_FAULT = 3
SAMPLE_COMMITS = 10  # of the K open transactions, committed after the failover
PROBE_REQUEST_TIMEOUT_MS = 2_000
PAYLOAD_BYTES = 100

# Answers that do not show a loaded coordinator N at the broker asked.
NOT_LOADED_ERRORS: tuple[type[TwinlogError], ...] = (
    CoordinatorLoadInProgressError,
    NotCoordinatorError,
    BrokerUnavailableError,
    RequestTimedOutError,
)

Announce = Callable[[str], None]


def unknown_producer_id(journal_partition: int) -> int:
    """A producer id no coordinator gave (far above any id block), whose low bits name
    coordinator ``journal_partition``."""
    return (1 << 62) | journal_partition


class CoordinatorProbe:
    """Does coordinator N answer at a broker? A begin_transaction for a producer id
    nobody has: a loaded coordinator answers UnknownProducerIdError at once and writes
    nothing; one loading answers CoordinatorLoadInProgressError; a broker that does not
    lead ``__txn_journal-N`` NotCoordinatorError."""

    def __init__(self, cluster: BenchCluster, journal_partition: int) -> None:
        self.cluster = cluster
        self.journal_partition = journal_partition
        self._clients: dict[str, RemoteBroker] = {}

    def answers_at(self, broker_id: int) -> bool:
        address = self.cluster.brokers[broker_id].address
        client = self._clients.get(address)
        if client is None:
            options = ConnectionOptions(request_timeout_ms=PROBE_REQUEST_TIMEOUT_MS)
            client = self._clients[address] = RemoteBroker(address, options)
        try:
            client.begin_transaction(unknown_producer_id(self.journal_partition), 0)
        except NOT_LOADED_ERRORS:
            return False
        except TwinlogError:
            return True  # UnknownProducerIdError: the coordinator is loaded and answers
        return True

    def answers(self) -> bool:
        """At the partition's current leader, as ZooKeeper names it."""
        state = self.cluster.state(TXN_JOURNAL_TOPIC, self.journal_partition)
        return state is not None and state.leader > 0 and self.answers_at(state.leader)

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()


def wait_coordinators_answer(cluster: BenchCluster, timeout_s: float) -> int:
    """Until every coordinator answers at its journal partition's leader; their count."""
    count = cluster.journal_partitions()
    for journal_partition in range(count):
        cluster.wait_full_isr(TXN_JOURNAL_TOPIC, journal_partition)
        probe = CoordinatorProbe(cluster, journal_partition)
        try:
            wait_for(
                f"transaction coordinator {journal_partition} loaded", probe.answers, timeout_s
            )
        finally:
            probe.close()
    return count


def choose_coordinator(cluster: BenchCluster, journal_partitions: int) -> tuple[int, int]:
    """(journal partition, its leader): the first not led by the controller, if any."""
    controller = cluster.controller_id()
    leaders = {
        n: cluster.wait_full_isr(TXN_JOURNAL_TOPIC, n).leader for n in range(journal_partitions)
    }
    for journal_partition, leader in leaders.items():
        if leader != controller:
            return journal_partition, leader
    return 0, leaders[0]


def transactional_ids(
    prefix: str, journal_partition: int, journal_partitions: int
) -> Iterator[str]:
    """Distinct transactional ids that coordinator ``journal_partition`` owns."""
    for number in itertools.count():
        candidate = f"{prefix}-{number}"
        if coordinator_partition_of_transactional_id(candidate, journal_partitions) == (
            journal_partition
        ):
            yield candidate


def _led_by_other(cluster: BenchCluster, topic: str, partition: int, old: int) -> bool:
    state = cluster.state(topic, partition)
    return state is not None and state.leader > 0 and state.leader != old


def coordinator_failover(
    cluster: BenchCluster, open_count: int, settings: BenchSettings, announce: Announce
) -> dict[str, Any]:
    """One SIGKILL of coordinator N's broker with ``open_count`` transactions open at N."""
    timeout_s = settings.phase_timeout_s
    journal_partitions = wait_coordinators_answer(cluster, timeout_s)
    journal_partition, old = choose_coordinator(cluster, journal_partitions)
    led_data = [
        p for p in range(PARTITIONS) if cluster.wait_full_isr(TOPIC, p).leader == old
    ]  # the topic's partitions that fail over with the coordinator
    ids = transactional_ids(
        f"bench-cf-{uuid.uuid4().hex[:8]}", journal_partition, journal_partitions
    )
    bootstrap = ",".join(cluster.live_addresses()[b] for b in sorted(cluster.live_addresses()))
    payload = settings.payloads()[0][:PAYLOAD_BYTES]
    sample = min(SAMPLE_COMMITS, open_count)
    opened = OpenTransactions(bootstrap, TOPIC, PARTITIONS, payload, timeout_s, sample)
    committer = CommitLoop(bootstrap, next(ids), TOPIC, PARTITIONS, payload, timeout_s)
    probe = CoordinatorProbe(cluster, journal_partition)
    process = cluster.brokers[old]
    try:
        if open_count:
            announce(f"opening {open_count:,} transactions at coordinator {journal_partition}")
        # The failover and the checks must be over before the first one times out.
        budget_s = OPEN_TRANSACTION_TIMEOUT_MS / 1000 - 2 * timeout_s
        open_s = opened.open([next(ids) for _ in range(open_count)], budget_s)
        committer.start()
        wait_for(
            "the committing producer's first commits",
            lambda: committer.check() and len(committer.commits) >= COMMITS_BEFORE_FAULT,
            timeout_s,
        )
        probes = {
            "registration_gone": lambda: not cluster.registered(old),
            "new_leader_written": lambda: _led_by_other(
                cluster, TXN_JOURNAL_TOPIC, journal_partition, old
            ),
            "data_leaders_written": lambda: all(
                _led_by_other(cluster, TOPIC, p, old) for p in led_data
            ),
            "coordinator_answers": lambda: (
                _led_by_other(cluster, TXN_JOURNAL_TOPIC, journal_partition, old)
                and probe.answers()
            ),
        }
        announce(f"SIGKILL of broker {old}, coordinator {journal_partition}'s")
        with Timeline(probes, timeout_s) as timeline:
            fault_s, fault_wall_s = time.monotonic(), time.time()
            process.signal(signal.SIGKILL)
            wait_for(
                f"a new leader of {TXN_JOURNAL_TOPIC}-{journal_partition}",
                lambda: timeline.seen("new_leader_written"),
                timeout_s,
                0.005,
            )
            written_s = timeline.require("new_leader_written")
            # The old coordinator is long dead once a new leader is written: a commit
            # answered after that was answered by the new one.
            commit = wait_for(
                "the looping producer's first commit at the new coordinator",
                lambda: committer.first_commit_after(written_s),
                timeout_s,
            )
            wait_for(
                f"coordinator {journal_partition} answering at its new leader",
                lambda: timeline.seen("coordinator_answers"),
                timeout_s,
            )
            wait_for(
                "the new leaders of the killed broker's partitions",
                lambda: timeline.seen("data_leaders_written"),
                timeout_s,
            )
        committer.stop()
        committer.check()
        new_state = cluster.state(TXN_JOURNAL_TOPIC, journal_partition)
        assert new_state is not None
        new_leader = new_state.leader
        announce(f"checking the {open_count:,} open transactions at broker {new_leader}")
        still_open = opened.still_open_at(cluster.brokers[new_leader].address)
        sample_committed, sample_errors = opened.commit_sample()
        aborted, abort_errors = opened.abort_rest()
    finally:
        committer.stop()
        opened.close()
        probe.close()
    gone = timeline.require("registration_gone") - fault_s
    written = written_s - fault_s
    answers = min(timeline.require("coordinator_answers"), commit.answered_s) - fault_s
    first_commit = commit.answered_s - fault_s
    last_before = committer.last_commit_before(fault_s)
    results: dict[str, Any] = {
        "open_transactions": open_count,
        "journal_partition": journal_partition,
        "journal_partitions": journal_partitions,
        "old_leader": old,
        "new_leader": new_leader,
        "new_leader_epoch": new_state.leader_epoch,
        "data_partitions_led_by_old": led_data,
        "open_s": open_s,
        "registration_gone_s": gone,
        "new_leader_written_s": written,
        "coordinator_answers_s": answers,
        "data_leaders_written_s": timeline.require("data_leaders_written") - fault_s,
        "first_commit_s": first_commit,
        "commit_pause_s": commit.answered_s - (last_before.answered_s if last_before else fault_s),
        "phases_s": {
            "session_expiry": gone,
            "controller_reaction": written - gone,
            "coordinator_load": answers - written,
            "client_commit": first_commit - answers,
        },
        "still_open": {"listed": still_open.listed, "ongoing": still_open.ongoing},
        "sample_committed": sample_committed,
        "sample": sample,
        "sample_errors": sample_errors,
        "aborted_after": aborted,
        "abort_errors": abort_errors,
        "client_errors": dict(committer.errors),
        "commits_between_kill_and_new_leader": sum(
            1 for c in committer.commits if fault_s < c.answered_s <= written_s
        ),
    }
    load = coordinator_load_from_log(
        cluster.brokers[new_leader].log_path,
        journal_partition,
        new_state.leader_epoch,
        fault_wall_s,
    )
    if load is not None:
        results["load_log"] = load
    announce(f"restarting broker {old}")
    restart_started_s = time.monotonic()
    process.start()
    results["partitions_checked_whole"] = cluster.wait_every_full_isr()
    wait_coordinators_answer(cluster, timeout_s)
    results["restart_to_whole_s"] = time.monotonic() - restart_started_s
    return results


def measure_coordinator_failovers(
    cluster: BenchCluster, settings: BenchSettings, announce: Announce
) -> list[dict[str, Any]]:
    """One round per count of ``settings.open_transactions``, in the order given."""
    cluster.create_topic(TOPIC, PARTITIONS)
    rounds = []
    for open_count in settings.open_transactions:
        announce(f"coordinator failover after SIGKILL, {open_count:,} open transactions")
        rounds.append(coordinator_failover(cluster, open_count, settings, announce))
    return rounds
