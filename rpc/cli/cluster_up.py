"""``twinlog cluster up``: a development cluster on this machine, in the foreground.

One local ZooKeeper (``LocalZooKeeper``: PySpark's jars, 127.0.0.1, a free port) and N
``twinlog serve --broker-id I --zookeeper ...`` processes on free loopback ports, each
with ``DATA_DIR/broker-I`` and its log in ``DATA_DIR/broker-I.log``; topics are
replicated min(3, N) times unless ``--config default_replication_factor=`` says otherwise.
It prints the bootstrap list once the internal topics exist and every leader answers
(``wait_until_ready``) and waits; Ctrl-C or
SIGTERM stops the brokers one by one (each with its controlled shutdown: leaderships
move to the brokers still up), then ZooKeeper. The
data directory keeps the znodes and the logs, so ``cluster up`` again restarts the same
cluster (on new ports).

A broker that exits on its own (a crash, a SIGKILL, a lost ZooKeeper session) is started
again on its own ports, as a supervisor would; one that stopped cleanly (status 0: a
SIGTERM, or ``twinlog cluster decommission``) stays down (``--no-restart``: left down, with a line
saying how to restart it); it waits out its old ZooKeeper session itself. More than
``RESTARTS_MAX`` exits within ``RESTART_WINDOW_S`` leave it down (a broker that cannot
start would otherwise loop).

The children do not see the terminal's Ctrl-C themselves (brokers run in sessions of
their own, ZooKeeper starts with SIGINT ignored): the stop order is this process's, not
a race. Not for production: a real ensemble and a supervisor per broker are
(docs/zookeeper.md).
"""

from __future__ import annotations

import argparse
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import FrameType

from twinlog.engine.base.errors import TwinlogError
from twinlog.engine.broker.internal_topics import INTERNAL_TOPICS
from twinlog.engine.zookeeper.credentials import ensure_zookeeper_credential_file
from twinlog.rpc.cli.cluster_certs import make_broker_certificates
from twinlog.rpc.cli.cluster_describe import from_servers
from twinlog.rpc.cli.interrupts import EXIT_INTERRUPTED
from twinlog.rpc.cli.local_zookeeper import LocalZooKeeper
from twinlog.rpc.client.connection_options import ConnectionOptions

SERVING = re.compile(r"serving on (\S+):(\d+) ")
SERVING_KAFKA = re.compile(r"serving Kafka clients on (\S+):(\d+) ")
BROKER_START_TIMEOUT_S = 60.0  # recovery of a large data directory, on two busy cores
# Every registered broker and every partition's leader answering: what "up" means before
# the bootstrap list is printed (leaderships are handed out after the brokers serve).
CLUSTER_READY_TIMEOUT_S = 60.0
# A development cluster's new topics, and its internal ones, are replicated this many
# times at most (fewer brokers: once per broker), unless --config says otherwise: the
# internal topics are created only once that many brokers are live, so a cluster of one or
# two brokers at the broker's default of 3 would never have a transaction journal.
REPLICATION_FACTOR_MAX = 3
REPLICATION_FACTOR_KEY = "default_replication_factor"
READY_PROBE_INTERVAL_S = 0.2
BROKER_STOP_TIMEOUT_S = 30.0  # controlled shutdown (10 s at most) plus closing the logs
WATCH_INTERVAL_S = 0.5
RESTARTS_MAX = 3  # restarts of one broker within RESTART_WINDOW_S; beyond, it stays down
RESTART_WINDOW_S = 60.0
PROBE_INTERVAL_S = 0.05


class BrokerChild:
    """One ``twinlog serve`` process. Thread rule: the command's main thread.

    ``environment``: the process's environment (None: this process's), e.g. with
    ``TWINLOG_FAILPOINTS`` for ``twinlog demo --cluster``."""

    def __init__(
        self,
        broker_id: int,
        data_dir: Path,
        arguments: list[str],
        environment: Mapping[str, str] | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.data_dir = data_dir
        self.log_path = data_dir.parent / f"{data_dir.name}.log"
        self.arguments = arguments
        self.environment = None if environment is None else dict(environment)
        self.process: subprocess.Popen[bytes] | None = None
        self.address = ""
        self.kafka_address = ""  # with --kafka-listener among the arguments
        self.reported_exit = False
        self.restarted_at_s: list[float] = []  # when it was started again after an exit

    def on_own_ports(self) -> None:
        """From now on it starts on the ports it serves on now (a restart keeps the
        addresses the others and the clients know), instead of free ones."""
        self.arguments = pinned_ports(self.arguments, self.address, self.kafka_address)

    def may_restart(self, now_s: float) -> bool:
        """Fewer than RESTARTS_MAX restarts within the last RESTART_WINDOW_S."""
        recent = [at for at in self.restarted_at_s if now_s - at < RESTART_WINDOW_S]
        return len(recent) < RESTARTS_MAX

    def start(self, stop_requested: threading.Event) -> None:
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "twinlog.rpc.cli", "serve", *self.arguments],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # the terminal's Ctrl-C is ours to hand on, in order
                env=self.environment,
            )
        kafka = "--kafka-listener" in self.arguments
        deadline_s = time.monotonic() + BROKER_START_TIMEOUT_S
        while time.monotonic() < deadline_s and not stop_requested.is_set():
            written = self.log_path.read_text(errors="replace")[offset:]
            found = SERVING.search(written)
            found_kafka = SERVING_KAFKA.search(written) if kafka else None
            if found and (found_kafka or not kafka):
                self.address = f"{found.group(1)}:{found.group(2)}"
                if found_kafka:
                    self.kafka_address = f"{found_kafka.group(1)}:{found_kafka.group(2)}"
                return
            if self.process.poll() is not None:
                raise TwinlogError(
                    f"broker {self.broker_id} exited with status {self.process.returncode} "
                    f"while starting; last lines of {self.log_path}:\n{self.log_tail()}"
                )
            time.sleep(PROBE_INTERVAL_S)
        if not stop_requested.is_set():
            raise TwinlogError(
                f"broker {self.broker_id} did not start serving within "
                f"{BROKER_START_TIMEOUT_S:.0f} s; last lines of {self.log_path}:\n{self.log_tail()}"
            )

    def exited(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def stop(self) -> int | None:
        """SIGTERM (a controlled shutdown), SIGKILL after BROKER_STOP_TIMEOUT_S."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=BROKER_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()

    def log_tail(self, lines: int = 15) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


def broker_arguments(
    args: argparse.Namespace, broker_id: int, data_dir: Path, connect: str
) -> list[str]:
    arguments = [
        "--data-dir",
        str(data_dir),
        "--port",
        "0",
        "--broker-id",
        str(broker_id),
        "--zookeeper",
        connect,
        "--zookeeper-session-timeout-ms",
        str(args.zookeeper_session_timeout_ms),
    ]
    if args.kafka_listeners:
        arguments.extend(["--kafka-listener", "127.0.0.1:0"])
    # Brokers authenticate each other (a certificate each, from a throwaway CA kept
    # beside the data): the internal services answer no one else. Their znodes are
    # readable and writable by their ZooKeeper credential alone.
    root = data_dir.parent  # the cluster's folder: every broker's data, the CA, the credential
    certificates = make_broker_certificates(root / "certs", [broker_id])
    arguments.extend(certificates[broker_id].serve_arguments())
    ensure_zookeeper_credential_file(zookeeper_auth_file(root))
    arguments.extend(["--zookeeper-auth-file", str(zookeeper_auth_file(root))])
    for pair in args.config:
        arguments.extend(["--config", pair])
    return arguments


def pinned_ports(arguments: list[str], address: str, kafka_address: str) -> list[str]:
    """``arguments`` with ``--port`` and ``--kafka-listener`` set to the ports of ``address``
    and ``kafka_address`` (HOST:PORT; "" keeps the argument as it is)."""
    pinned = list(arguments)
    for flag, at in (("--port", address), ("--kafka-listener", kafka_address)):
        if not at or flag not in pinned:
            continue
        index = pinned.index(flag) + 1
        port = at.rpartition(":")[2]
        pinned[index] = port if flag == "--port" else f"{pinned[index].rpartition(':')[0]}:{port}"
    return pinned


def with_replication_factor(config: list[str], brokers: int) -> list[str]:
    """``config`` (``--config key=value`` pairs) with the cluster's replication factor,
    ``min(REPLICATION_FACTOR_MAX, brokers)``, unless one of them sets it already."""
    for pair in config:
        key = pair.partition("=")[0].strip().replace(".", "_").replace("-", "_")
        if key == REPLICATION_FACTOR_KEY:
            return config
    return [*config, f"{REPLICATION_FACTOR_KEY}={min(REPLICATION_FACTOR_MAX, brokers)}"]


def zookeeper_auth_file(root: Path) -> Path:
    """The development cluster's ZooKeeper credential, made at its first start."""
    return root / "zookeeper.auth"


def start_zookeeper(zookeeper: LocalZooKeeper) -> None:
    """Start it with SIGINT ignored, which the JVM keeps: the terminal's Ctrl-C must not
    stop ZooKeeper under brokers that are still shutting down. (A Ctrl-C while it starts
    is lost.)"""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        zookeeper.start()
    finally:
        signal.signal(signal.SIGINT, previous)


def stop_cluster(
    brokers: list[BrokerChild], zookeeper: LocalZooKeeper, say: Callable[[str], None]
) -> None:
    """The brokers one by one, last started first (each moves its leaderships to the
    brokers still up: a controlled shutdown), then ZooKeeper; ``say`` reports each."""
    for child in reversed(brokers):
        code = child.stop()
        if code is not None and not child.reported_exit:
            say(f"broker {child.broker_id} stopped (status {code})")
    zookeeper.stop()
    say("ZooKeeper stopped")


def _print(line: str) -> None:
    print(line, flush=True)


def run(args: argparse.Namespace) -> int:
    root = Path(args.data_dir)
    root.mkdir(parents=True, exist_ok=True)
    stop_requested = threading.Event()
    signals_seen: list[int] = []

    def on_signal(number: int, frame: FrameType | None) -> None:
        signals_seen.append(number)
        stop_requested.set()

    previous = {
        number: signal.signal(number, on_signal) for number in (signal.SIGTERM, signal.SIGINT)
    }
    zookeeper = LocalZooKeeper(root / "zookeeper", tick_time_ms=args.tick_time_ms)
    brokers: list[BrokerChild] = []
    args.config = with_replication_factor(args.config, args.brokers)
    try:
        start_zookeeper(zookeeper)
        connect = f"{zookeeper.connect_string}/twinlog/{args.name}"
        print(f"ZooKeeper: {zookeeper.connect_string} (log {zookeeper.log_path})", flush=True)
        for broker_id in range(1, args.brokers + 1):
            if stop_requested.is_set():
                break
            data_dir = root / f"broker-{broker_id}"
            child = BrokerChild(
                broker_id, data_dir, broker_arguments(args, broker_id, data_dir, connect)
            )
            brokers.append(child)
            child.start(stop_requested)
            if child.address:
                kafka = f", Kafka {child.kafka_address}" if child.kafka_address else ""
                print(
                    f"broker {broker_id}: {child.address}{kafka} (data {data_dir}, log "
                    f"{child.log_path})",
                    flush=True,
                )
        if not stop_requested.is_set():
            wait_until_ready(brokers, stop_requested)
        if not stop_requested.is_set():
            print(
                f"cluster: --zookeeper {connect} --zookeeper-auth-file {zookeeper_auth_file(root)}",
                flush=True,
            )
            print(f"bootstrap servers: {','.join(child.address for child in brokers)}", flush=True)
            if args.kafka_listeners:
                kafka_list = ",".join(child.kafka_address for child in brokers)
                print(f"Kafka bootstrap servers: {kafka_list}", flush=True)
            print("Ctrl-C or SIGTERM stops the brokers, then ZooKeeper", flush=True)
        for child in brokers:
            child.on_own_ports()
        status = _watch(brokers, zookeeper, stop_requested, restart=not args.no_restart)
        if status == 0 and signals_seen and signals_seen[0] == signal.SIGINT:
            status = EXIT_INTERRUPTED
        return status
    finally:
        stop_cluster(brokers, zookeeper, _print)
        for number, handler in previous.items():
            signal.signal(number, handler)


def wait_until_ready(brokers: list[BrokerChild], stop_requested: threading.Event) -> None:
    """Until the cluster's metadata names every broker and the internal topics, and every
    partition's leader answers for it (the internal topics are created once enough
    brokers are live, and their leaderships given out after that: a client sent there
    sooner is told "not the leader", or finds no coordinator). Raises TwinlogError
    naming what is still missing after ``CLUSTER_READY_TIMEOUT_S``."""
    servers = ",".join(child.address for child in brokers)
    options = ConnectionOptions(request_timeout_ms=5_000)
    deadline_s = time.monotonic() + CLUSTER_READY_TIMEOUT_S
    missing = "no answer yet"
    while not stop_requested.is_set():
        try:
            report = from_servers(servers, options, [])
        except TwinlogError as error:
            missing = f"{type(error).__name__}: {error}"
        else:
            registered = len(report.metadata.brokers)
            leaderless = [
                f"{topic.name}-{item.partition}"
                for topic in report.metadata.topics
                for item in topic.partitions
                if item.offline
            ]
            absent = sorted(INTERNAL_TOPICS - {topic.name for topic in report.metadata.topics})
            if registered < len(brokers):
                missing = f"{registered} of {len(brokers)} brokers registered"
            elif absent:
                missing = f"{', '.join(absent)} not created yet"
            elif leaderless:
                missing = f"no leader yet for {', '.join(leaderless[:5])}"
            elif report.unreachable:
                missing = "; ".join(f"{a}: {why}" for a, why in report.unreachable.items())
            else:
                return
        if time.monotonic() >= deadline_s:
            raise TwinlogError(
                f"the cluster did not become ready within {CLUSTER_READY_TIMEOUT_S:.0f} s "
                f"({missing}); see the brokers' logs in their data directories"
            )
        stop_requested.wait(READY_PROBE_INTERVAL_S)


def _watch(
    brokers: list[BrokerChild],
    zookeeper: LocalZooKeeper,
    stop_requested: threading.Event,
    restart: bool = True,
) -> int:
    """Until a stop is asked: a broker that exits on its own is started again on its own
    ports (``restart``, within RESTARTS_MAX per RESTART_WINDOW_S), or said once; a
    ZooKeeper that exits ends the command (status 1)."""
    while not stop_requested.wait(WATCH_INTERVAL_S):
        status = zookeeper.exited()
        if status is not None:
            print(
                f"error: ZooKeeper exited on its own with status {status}; see {zookeeper.log_path}",
                file=sys.stderr,
            )
            return 1
        for child in brokers:
            code = child.exited()
            if code is None or child.reported_exit:
                continue
            # Status 0 is a clean stop someone asked for (a SIGTERM, a decommission's
            # ShutdownBroker), as a supervisor's Restart=on-failure reads it: left down.
            if restart and code != 0 and child.may_restart(time.monotonic()):
                _restart(child, code, stop_requested)
                continue
            child.reported_exit = True
            if code == 0:
                why = "a clean stop, asked of it: it stays down"
            elif restart:
                why = f"it exited {RESTARTS_MAX} times within {RESTART_WINDOW_S:.0f} s, so it stays down"
            else:
                why = "the others go on"
            print(
                f"warning: broker {child.broker_id} exited with status {code}; see "
                f"{child.log_path} ({why}; restart it with: twinlog serve "
                f"{' '.join(child.arguments)})",
                file=sys.stderr,
                flush=True,
            )
    return 0


def _restart(child: BrokerChild, code: int, stop_requested: threading.Event) -> None:
    """Start ``child`` again on its own ports; it waits out its old ZooKeeper session
    itself. A start that fails is said, and counts as one more exit."""
    child.restarted_at_s.append(time.monotonic())
    print(
        f"warning: broker {child.broker_id} exited with status {code}; starting it again at "
        f"{child.address} (restart {len(child.restarted_at_s)}; see {child.log_path})",
        file=sys.stderr,
        flush=True,
    )
    try:
        child.start(stop_requested)
    except TwinlogError as error:
        print(f"error: {error}", file=sys.stderr, flush=True)
        return
    if child.exited() is None and not stop_requested.is_set():
        print(f"broker {child.broker_id}: serving again at {child.address}", flush=True)
