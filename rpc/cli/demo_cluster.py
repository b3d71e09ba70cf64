"""``twinlog demo --cluster``: transactions across three brokers, and the coordinator's
broker killed in the middle of a commit.

A local ZooKeeper and three ``twinlog serve --broker-id N`` processes, started as
``twinlog cluster up`` starts them (``cluster_up``), in a temporary directory (or an
empty ``--data-dir``), with settings that make a failover quick (4 s ZooKeeper
sessions; a follower 6 s behind leaves the ISR; one transaction coordinator):

1. start ZooKeeper and brokers 1, 2, 3;
2. create topic ``payments``, 3 partitions, replication factor 3; wait until each has
   a leader and 3 in-sync replicas, and until ``__txn_journal-0`` has a leader (its
   leader is the transaction coordinator); say who leads what;
3. commit two transactions with a producer on the bootstrap list, each writing one
   record to each partition (so to different brokers), and abort one;
4. commit one more while the coordinator's broker is set to kill itself (SIGKILL)
   right after its PREPARE_COMMIT is durable and replicated, before answering. Every
   broker runs with the failpoint ``coordinator.after_prepare=crash?DATA_DIR/
   crash-coordinator`` (``engine/base/failpoints.py``); the demo creates that file
   just before this commit and removes it once the broker is dead. The producer's
   commit call finds the new coordinator, which replayed the replicated journal and
   redid the prepared commit, and gets its answer;
5. commit one more at the new coordinator;
6. read the topic with a vanilla consumer: every committed record exactly once, in
   order, nothing of the aborted transaction;
7. restart the killed broker and wait until it is back in sync;
then stop the brokers one by one (controlled shutdown) and ZooKeeper, also on Ctrl-C
or SIGTERM. Every wait is bounded and names what it waited for when it times out.

Exit status 0 when the check of act 6 holds, 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from types import FrameType
from typing import TypeVar

from twinlog.engine.base.cluster_metadata import ClusterMetadata, PartitionMetadata
from twinlog.engine.base.errors import TwinlogError
from twinlog.engine.base.failpoints import ENVIRONMENT_VARIABLE as FAILPOINTS_VARIABLE
from twinlog.engine.broker.internal_topics import TXN_JOURNAL_TOPIC
from twinlog.rpc.cli.arguments import UsageError
from twinlog.rpc.cli.cluster_up import BrokerChild, broker_arguments, start_zookeeper, stop_cluster
from twinlog.rpc.cli.common import print_table
from twinlog.rpc.cli.local_zookeeper import LocalZooKeeper
from twinlog.rpc.client import Consumer, Producer
from twinlog.rpc.client.cluster import ClusterBroker
from twinlog.rpc.client.connection_options import ConnectionOptions
from twinlog.rpc.client.remote import RemoteBroker
from twinlog.rpc.wire.broker_api import CoordinatorKeyType

T = TypeVar("T")

TOPIC = "payments"
PARTITIONS = 3
BROKERS = (1, 2, 3)
TRANSACTIONAL_ID = "payments-app"
CHROOT = "/twinlog/demo"
INDENT = "   "

# Failover in seconds rather than tens of them (tests/support/cluster_support.py's).
SESSION_TIMEOUT_MS = 4_000
TICK_TIME_MS = 500
BROKER_SETTINGS = (
    "journal_partitions=1",
    "replica_lag_time_max_ms=6000",
    "replica_ack_timeout_ms=10000",
)
FAILPOINT = "coordinator.after_prepare"
CRASH_FILE = "crash-coordinator"

# Bounds of every wait.
READY_TIMEOUT_S = 60.0  # topic and coordinator: a cold start on two busy cores
CALL_TIMEOUT_MS = 45_000  # one transactional call, a coordinator failover included
REQUEST_TIMEOUT_MS = 30_000
METADATA_TIMEOUT_MS = 2_000
CRASH_TIMEOUT_S = 30.0  # the commit starting to the broker's death
FAILOVER_TIMEOUT_S = 60.0
READ_TIMEOUT_S = 30.0
REJOIN_TIMEOUT_S = 60.0
POLL_S = 0.1

DataDirectory = Callable[[str | None, bool], AbstractContextManager[Path]]


class DemoTimeoutError(TwinlogError):
    """A bounded wait of the demo ran out; the message names what it waited for."""


def say(text: str = "") -> None:
    print(text, flush=True)


def indented(text: str) -> None:
    say(INDENT + text)


def wait_for(what: str, probe: Callable[[], T | None], timeout_s: float) -> T:
    """``probe()``'s first truthy answer, asked every POLL_S; DemoTimeoutError naming
    ``what`` (and the last retriable error the probe met) after ``timeout_s``."""
    deadline_s = time.monotonic() + timeout_s
    last_error = ""
    while True:
        try:
            found = probe()
        except TwinlogError as error:
            if not error.retriable:
                raise
            found, last_error = None, f" (last error: {type(error).__name__}: {error})"
        if found:
            return found
        if time.monotonic() >= deadline_s:
            raise DemoTimeoutError(
                f"timed out after {timeout_s:.0f} s waiting for {what}{last_error}"
            )
        time.sleep(POLL_S)


def run(args: argparse.Namespace, data_directory: DataDirectory) -> int:
    if args.data_dir and Path(args.data_dir).exists() and any(Path(args.data_dir).iterdir()):
        raise UsageError(
            f"--data-dir {args.data_dir} is not empty: the cluster demo starts from nothing "
            "(give a new or empty directory, or none for a temporary one)"
        )
    started_s = time.monotonic()
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        with data_directory(args.data_dir, args.keep) as directory:
            status = play(directory.resolve())
    finally:
        signal.signal(signal.SIGTERM, previous)
    say(f"\ndone in {time.monotonic() - started_s:.1f} s")
    return status


def _interrupt(number: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # SIGTERM as Ctrl-C: the cluster is stopped on the way out


@contextlib.contextmanager
def _uninterrupted() -> Iterator[None]:
    """Ctrl-C and SIGTERM only say "stopping" while the cluster stops (bounded: each
    broker is SIGKILLed after cluster_up.BROKER_STOP_TIMEOUT_S)."""

    def note(number: int, frame: FrameType | None) -> None:
        indented("(stopping the cluster first; this takes a few seconds)")

    previous = {number: signal.signal(number, note) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def play(directory: Path) -> int:
    say(f"twinlog demo --cluster: ZooKeeper and three brokers in {directory}")
    directory.mkdir(parents=True, exist_ok=True)
    crash_file = directory / CRASH_FILE
    environment = dict(os.environ)
    environment[FAILPOINTS_VARIABLE] = f"{FAILPOINT}=crash?{crash_file}"
    zookeeper = LocalZooKeeper(directory / "zookeeper", tick_time_ms=TICK_TIME_MS)
    brokers: list[BrokerChild] = []
    try:
        act_start(directory, zookeeper, brokers, environment)
        return act_transactions(brokers, crash_file)
    except KeyboardInterrupt:
        say("\ninterrupted")
        raise
    except Exception:
        for child in brokers:
            say(f"--- last lines of {child.log_path} ---\n{child.log_tail()}")
        raise
    finally:
        crash_file.unlink(missing_ok=True)
        say("\n8. stopping: each broker with its controlled shutdown, then ZooKeeper")
        stopping_s = time.monotonic()
        with _uninterrupted():
            stop_cluster(brokers, zookeeper, indented)
        indented(f"(all stopped in {time.monotonic() - stopping_s:.1f} s)")


def act_start(
    directory: Path,
    zookeeper: LocalZooKeeper,
    brokers: list[BrokerChild],
    environment: dict[str, str],
) -> None:
    started_s = time.monotonic()
    start_zookeeper(zookeeper)
    connect = zookeeper.connect_string + CHROOT
    settings = argparse.Namespace(
        zookeeper_session_timeout_ms=SESSION_TIMEOUT_MS,
        config=list(BROKER_SETTINGS),
        kafka_listeners=False,
    )
    never = threading.Event()  # Ctrl-C raises KeyboardInterrupt here instead
    for broker_id in BROKERS:
        data_dir = directory / f"broker-{broker_id}"
        arguments = broker_arguments(settings, broker_id, data_dir, connect)
        child = BrokerChild(broker_id, data_dir, arguments, environment)
        brokers.append(child)
        child.start(never)
    say(f"\n1. ZooKeeper {connect} and three brokers ({time.monotonic() - started_s:.1f} s):")
    for child in brokers:
        indented(f"broker {child.broker_id}: {child.address} (log {child.log_path})")
    indented(
        f"each with {FAILPOINTS_VARIABLE}={FAILPOINT}=crash?DATA_DIR/{CRASH_FILE}: "
        f"SIGKILL right after a PREPARE_COMMIT, while that file exists"
    )


def _bootstrap(brokers: list[BrokerChild]) -> str:
    return ",".join(child.address for child in brokers if child.exited() is None)


def act_transactions(brokers: list[BrokerChild], crash_file: Path) -> int:
    """Acts 2-7; the exit status."""
    options = ConnectionOptions(request_timeout_ms=REQUEST_TIMEOUT_MS)
    with ClusterBroker(_bootstrap(brokers), options) as admin:
        started_s = time.monotonic()
        admin.create_topic(TOPIC, PARTITIONS, {"replication.factor": str(len(BROKERS))})
        metadata = wait_for_ready(admin)
        coordinator = find_coordinator(brokers, exclude=None)
        say(
            f"\n2. topic {TOPIC!r}: {PARTITIONS} partitions, replication factor {len(BROKERS)}, "
            f"ready in {time.monotonic() - started_s:.1f} s:"
        )
        show_partitions(metadata)
        indented(
            f"coordinator of {TRANSACTIONAL_ID!r} (FindCoordinator): broker {coordinator}; "
            f"coordinator N is the leader of {TXN_JOURNAL_TOPIC}-N"
        )
        expected: list[tuple[int, str]] = []
        aborted: list[str] = []
        with Producer(
            _bootstrap(brokers),
            transactional_id=TRANSACTIONAL_ID,
            linger_ms=0,
            request_timeout_ms=REQUEST_TIMEOUT_MS,
        ) as producer:
            producer.init_transactions(timeout_ms=CALL_TIMEOUT_MS)
            leaders = _leaders(metadata)
            say(
                "\n3. transactions, each writing one record to every partition: "
                + ", ".join(f"p{p} at broker {b}" for p, b in sorted(leaders.items()))
                + f"; broker {coordinator} decides"
            )
            for number in (1, 2):
                expected += commit_one(producer, number)
            transaction_id = producer.begin_transaction()
            for partition in range(PARTITIONS):
                value = f"aborted {transaction_id} -> partition {partition}"
                producer.send(TOPIC, value.encode(), key=b"aborted", partition=partition)
                aborted.append(value)
            producer.flush(CALL_TIMEOUT_MS)
            producer.abort_transaction(timeout_ms=CALL_TIMEOUT_MS)
            indented(f"transaction {transaction_id}: {PARTITIONS} records sent, then aborted")

            killed = brokers[BROKERS.index(coordinator)]
            expected += act_crash(producer, admin, brokers, killed, crash_file)
            say("\n5. one more, at the new coordinator:")
            expected += commit_one(producer, 4)
        status = act_read(_bootstrap(brokers), expected, aborted)
        act_restart(admin, killed)
    return status


def wait_for_ready(admin: ClusterBroker) -> ClusterMetadata:
    def probe() -> ClusterMetadata | None:
        metadata = admin.cluster_metadata([TOPIC, TXN_JOURNAL_TOPIC], METADATA_TIMEOUT_MS)
        partitions = [metadata.partition(TOPIC, p) for p in range(PARTITIONS)]
        journal = metadata.partition(TXN_JOURNAL_TOPIC, 0)
        ready = all(
            item is not None and not item.offline and len(item.isr) == len(BROKERS)
            for item in partitions
        )
        return metadata if ready and journal is not None and not journal.offline else None

    return wait_for(
        f"{TOPIC}'s {PARTITIONS} partitions to have a leader and {len(BROKERS)} in-sync "
        f"replicas, and {TXN_JOURNAL_TOPIC}-0 (the coordinator) a leader",
        probe,
        READY_TIMEOUT_S,
    )


def find_coordinator(brokers: list[BrokerChild], exclude: int | None) -> int:
    """The broker id FindCoordinator names for TRANSACTIONAL_ID, asked of a live broker;
    waits while it names none, or ``exclude`` (a dead one whose session lives on)."""

    def probe() -> int | None:
        for child in brokers:
            if child.exited() is not None:
                continue
            options = ConnectionOptions(request_timeout_ms=METADATA_TIMEOUT_MS)
            with RemoteBroker(child.address, options) as remote:
                found = remote.find_coordinator(CoordinatorKeyType.TRANSACTION, TRANSACTIONAL_ID)
            if found is None:
                raise TwinlogError(f"broker {child.broker_id} has no FindCoordinator call")
            broker_id = found.broker.broker_id
            return None if broker_id == exclude else broker_id
        return None

    named = "" if exclude is None else f" other than broker {exclude}"
    return wait_for(
        f"a coordinator{named} for transactional id {TRANSACTIONAL_ID!r}",
        probe,
        FAILOVER_TIMEOUT_S,
    )


def _leaders(metadata: ClusterMetadata) -> dict[int, int]:
    found = (metadata.partition(TOPIC, p) for p in range(PARTITIONS))
    return {item.partition: item.leader_id for item in found if item is not None}


def show_partitions(metadata: ClusterMetadata) -> None:
    rows = []
    for partition in range(PARTITIONS):
        item = metadata.partition(TOPIC, partition)
        if item is not None:
            rows.append([f"{TOPIC}-{partition}", *_row(item)])
    journal = metadata.partition(TXN_JOURNAL_TOPIC, 0)
    if journal is not None:
        rows.append([f"{TXN_JOURNAL_TOPIC}-0", *_row(journal)])
    print_table(rows, ["partition", "leader", "epoch", "replicas", "in sync"], INDENT)


def _row(item: PartitionMetadata) -> list[str]:
    leader = "none" if item.offline else f"broker {item.leader_id}"
    return [
        leader,
        str(item.leader_epoch),
        ",".join(map(str, item.replicas)),
        ",".join(map(str, item.isr)),
    ]


def _values(transaction: int) -> list[tuple[int, str]]:
    return [(p, f"txn {transaction} -> partition {p}") for p in range(PARTITIONS)]


def send_one(producer: Producer, number: int) -> tuple[int, list[tuple[int, str]]]:
    """Begin transaction ``number`` and write one record to each partition, acknowledged;
    (its id, its (partition, value)s)."""
    transaction_id = producer.begin_transaction()
    values = _values(number)
    for partition, value in values:
        producer.send(TOPIC, value.encode(), key=f"t{number}".encode(), partition=partition)
    producer.flush(CALL_TIMEOUT_MS)
    return transaction_id, values


def commit_one(producer: Producer, number: int) -> list[tuple[int, str]]:
    transaction_id, values = send_one(producer, number)
    started_s = time.monotonic()
    producer.commit_transaction(timeout_ms=CALL_TIMEOUT_MS)
    indented(
        f"transaction {transaction_id}: {PARTITIONS} records, committed "
        f"({(time.monotonic() - started_s) * 1000:.0f} ms)"
    )
    return values


class DeathWatch:
    """Waits (on a thread) for a broker process to die; then removes the crash file at
    once, so that the next coordinator does not kill itself too."""

    def __init__(self, child: BrokerChild, crash_file: Path) -> None:
        assert child.process is not None
        self.process = child.process
        self.crash_file = crash_file
        self.died_s: float | None = None
        self.status: int | None = None
        self.thread = threading.Thread(target=self._watch, name="death-watch", daemon=True)

    def _watch(self) -> None:
        try:
            self.status = self.process.wait(timeout=CRASH_TIMEOUT_S)
            self.died_s = time.monotonic()
        except subprocess.TimeoutExpired:  # seen by the demo as "did not die"
            pass
        finally:
            self.crash_file.unlink(missing_ok=True)


LOADED = re.compile(r"transaction coordinator 0 loaded at epoch \d+: (.*), \d+ ms$", re.MULTILINE)


def act_crash(
    producer: Producer,
    admin: ClusterBroker,
    brokers: list[BrokerChild],
    killed: BrokerChild,
    crash_file: Path,
) -> list[tuple[int, str]]:
    say(
        f"\n4. one more, and broker {killed.broker_id}, the coordinator, is killed in the "
        "middle of its commit:"
    )
    transaction_id, values = send_one(producer, 3)
    indented(
        f"transaction {transaction_id}: {PARTITIONS} records sent; {CRASH_FILE} created; "
        "commit called"
    )
    watch = DeathWatch(killed, crash_file)
    crash_file.touch()
    watch.thread.start()
    started_s = time.monotonic()
    try:
        producer.commit_transaction(timeout_ms=CALL_TIMEOUT_MS)
    finally:
        answered_s = time.monotonic()
        watch.thread.join(CRASH_TIMEOUT_S)
    if watch.died_s is None:
        raise TwinlogError(
            f"broker {killed.broker_id} answered the commit and did not die: the failpoint "
            f"{FAILPOINT} was not reached"
        )
    if watch.status != -signal.SIGKILL:
        raise TwinlogError(
            f"broker {killed.broker_id} ended with status {watch.status}, not by SIGKILL"
        )
    indented(
        f"broker {killed.broker_id} killed itself (SIGKILL) "
        f"{(watch.died_s - started_s) * 1000:.0f} ms into the commit, right after its "
        f"PREPARE_COMMIT was durable and replicated; {CRASH_FILE} removed"
    )
    coordinator = find_coordinator(brokers, exclude=killed.broker_id)
    successor = brokers[BROKERS.index(coordinator)]
    loads = LOADED.findall(successor.log_path.read_text(errors="replace"))
    indented(
        f"the producer's commit call found the new coordinator, broker {coordinator}"
        + (f" (its log: {loads[-1]})" if loads else "")
    )
    indented(
        f"transaction {transaction_id}: committed, answered "
        f"{answered_s - watch.died_s:.1f} s after the kill (kill -> commit answered)"
    )
    indented("who leads now:")
    show_partitions(admin.cluster_metadata([TOPIC, TXN_JOURNAL_TOPIC], METADATA_TIMEOUT_MS))
    return values


def act_read(bootstrap: str, expected: list[tuple[int, str]], aborted: list[str]) -> int:
    say("\n6. a vanilla consumer reads every partition (no transaction logic):")
    read: list[tuple[int, int, str]] = []
    with Consumer(bootstrap, request_timeout_ms=REQUEST_TIMEOUT_MS) as consumer:
        consumer.assign([(TOPIC, partition) for partition in range(PARTITIONS)])
        consumer.seek_to_beginning()
        deadline_s = time.monotonic() + READ_TIMEOUT_S
        while len(read) < len(expected) and time.monotonic() < deadline_s:
            for record in consumer.poll(timeout_ms=200):
                read.append((record.partition, record.offset, (record.value or b"").decode()))
        read.extend(  # anything more (a duplicate) would be there by now
            (record.partition, record.offset, (record.value or b"").decode())
            for record in consumer.poll(timeout_ms=500)
        )
    read.sort()
    print_table([[str(p), str(o), v] for p, o, v in read], ["partition", "offset", "value"], INDENT)
    problems = check(read, expected, aborted)
    if problems:
        indented("CHECK FAILED: " + "; ".join(problems))
        return 1
    indented(
        f"{len(read)} records read: every committed record exactly once, in commit order; "
        "nothing of the aborted transaction"
    )
    return 0


def check(
    read: list[tuple[int, int, str]], expected: list[tuple[int, str]], aborted: list[str]
) -> list[str]:
    """What is wrong with ``read`` (sorted by partition and offset); empty when nothing."""
    problems = []
    counts = Counter((partition, value) for partition, _, value in read)
    missing = [item for item in expected if counts[item] == 0]
    twice = [item for item, count in counts.items() if count > 1]
    seen_aborted = [value for _, _, value in read if value in aborted]
    unexpected = [item for item in counts if item not in expected and item[1] not in aborted]
    if missing:
        problems.append(f"{len(missing)} committed records missing: {missing}")
    if twice:
        problems.append(f"records read more than once: {twice}")
    if seen_aborted:
        problems.append(f"records of the aborted transaction read: {seen_aborted}")
    if unexpected:
        problems.append(f"records nobody committed: {unexpected}")
    for partition in range(PARTITIONS):
        order = [value for p, _, value in read if p == partition]
        wanted = [value for p, value in expected if p == partition]
        if not problems and order != wanted:
            problems.append(f"partition {partition} is out of order: {order}")
    return problems


def act_restart(admin: ClusterBroker, killed: BrokerChild) -> None:
    say(f"\n7. broker {killed.broker_id} restarts:")
    started_s = time.monotonic()
    killed.start(threading.Event())

    def probe() -> ClusterMetadata | None:
        metadata = admin.cluster_metadata([TOPIC, TXN_JOURNAL_TOPIC], METADATA_TIMEOUT_MS)
        items = [metadata.partition(TOPIC, p) for p in range(PARTITIONS)]
        items.append(metadata.partition(TXN_JOURNAL_TOPIC, 0))
        back = all(item is not None and killed.broker_id in item.isr for item in items)
        return metadata if back else None

    metadata = wait_for(
        f"broker {killed.broker_id} to be back in sync on every partition",
        probe,
        REJOIN_TIMEOUT_S,
    )
    indented(
        f"serving on {killed.address}, in sync again on every partition after "
        f"{time.monotonic() - started_s:.1f} s:"
    )
    show_partitions(metadata)
