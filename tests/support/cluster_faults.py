"""Three real brokers on one ZooKeeper, and the faults a test does to them (CLUSTER.md §4.2).

``FaultCluster(root, zookeeper)`` runs ``twinlog serve --broker-id N --zookeeper ...``
for N = 1, 2, 3, secured as a production cluster is (``cluster_security``: tokens, an
ACL file, broker certificates for mutual TLS between brokers, the ZooKeeper credential;
``secure=False`` for none of it), each wired so that a test can cut it:

    broker N --(its own ZooKeeper proxy)--> ZooKeeper    cut: brokers[N].zookeeper_link.hold()
    other brokers --(N's broker inbound proxy)--> N's inter-broker listener
    cluster clients --(N's client proxy)--(N's client inbound proxy)--> N's client port
        the two inbound proxies are one link:             cut: brokers[N].inbound_link.hold()
        the client proxy alone:                           cut: brokers[N].client_link.hold()
    test clients (``client(N)``) -----------> broker N     never cut

``hold(UP)`` or ``hold(DOWN)`` on a link cuts one direction only (``tcp_proxy``).

(On an ensemble, ``h:p,h:p,h:p``, brokers reach ZooKeeper directly: no ZooKeeper link.)

Broker N listens on ports fixed for its life (so a restart keeps them, and the proxies
stay valid): its client port, and its inter-broker listener (``--inter-broker-listener
127.0.0.1:PORT``, where, with broker certificates, replication and coordination are
served, and only there). It registers the client proxy's port for clients
(``TWINLOG_ADVERTISED_PORT``) and the broker inbound proxy's for brokers
(``TWINLOG_INTER_BROKER_PORT``, both read by ``rpc/cluster/cluster_member.py``): other
brokers fetch and coordinate through the broker inbound proxy (TLS passes through it
untouched; the certificate's name is checked against the broker id, not the port); a
cluster client (a bootstrap list) follows Metadata to the client proxy, which forwards
through the client inbound one, so cutting the inbound link cuts brokers and clients
alike, and cutting the client link cuts clients only. (Without security the internal
services are on the client port: one inbound proxy then carries both.) Its data log
writes fail with ENOSPC while the file ``cluster.disk_full_flag(N)`` exists (the
``log.before_write`` failpoint).

Every client the cluster hands out carries a principal's token: ``client(N)`` the
operator's (who may do everything) unless told another; ``client_arguments(principal)``
for a ``Producer`` or ``Consumer`` on ``bootstrap``. The workload (``cluster_workload``)
acts as narrower principals.

A broker that exits is not restarted by anyone but the test: ``restart(N)`` is the
supervisor, and waits (as a supervisor's restart delay would) until ZooKeeper has
expired the old session's registration, which a new one would otherwise meet.

State is read from ZooKeeper directly, through the test's own session (never proxied,
authenticated with the cluster's ZooKeeper credential). Every wait polls with a deadline
(``wait_until``); nothing here sleeps to synchronise.

No tests here. Thread rule: the test's thread, except ``client`` and ``state``, which
the workload threads (``cluster_workload``) call too.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from checkout import ROOT
from cluster_security import OPERATOR, ClusterSecurity
from server_process import environment
from tcp_proxy import HoldingProxy, ProxyGroup

from twinlog.engine.base.failpoints import ENVIRONMENT_VARIABLE as FAILPOINTS_VARIABLE
from twinlog.engine.broker.internal_topics import TXN_JOURNAL_TOPIC
from twinlog.engine.zookeeper.broker_registration import BrokerInfo, live_brokers
from twinlog.engine.zookeeper.controller_epoch import read_controller
from twinlog.engine.zookeeper.partition_state import PartitionState, read_partition_state
from twinlog.engine.zookeeper.session import ZooKeeperSession, ZooKeeperUnavailableError
from twinlog.rpc.cli.local_zookeeper import free_loopback_port
from twinlog.rpc.client.connection_options import ConnectionOptions
from twinlog.rpc.client.remote import RemoteBroker
from twinlog.rpc.cluster.cluster_member import (
    ADVERTISED_PORT_VARIABLE,
    EXIT_SESSION_LOST,
    INTER_BROKER_PORT_VARIABLE,
)

T = TypeVar("T")

BROKER_IDS = (1, 2, 3)
SESSION_TIMEOUT_MS = 4000  # CLUSTER.md §3.9's test setting
# Above the session timeout (KIP-537: the controller notices a dead broker first), and
# short, so an ISR shrink (F15, F24) takes seconds.
REPLICA_LAG_TIME_MAX_MS = 6000
REPLICA_ACK_TIMEOUT_MS = 5000  # a produce waiting for its replicas gives up after this
BROKER_CONFIG = {
    "replica_lag_time_max_ms": REPLICA_LAG_TIME_MAX_MS,
    "replica_ack_timeout_ms": REPLICA_ACK_TIMEOUT_MS,
    "min_insync_replicas": 2,
    "journal_partitions": 1,  # fewer partitions to open: brokers start faster
    "offsets_partitions": 1,
}
# Step failpoints armed in every broker's environment; each fires (SIGKILL) while the
# broker's crash_flag(point) file exists: the coordinator's steps of CLUSTER.md F7.
CRASH_POINTS = (
    "coordinator.journal_appended",  # a record appended at the leader, not yet replicated
    "coordinator.after_prepare",
    "coordinator.during_apply",  # one partition's APPLY done, the others maybe not
    "coordinator.after_apply",
)
CLIENT_REQUEST_TIMEOUT_MS = 3000  # a paused or cut broker costs a client this much per call
WAIT_S = 40.0  # generous: three brokers, a JVM and the test share two busy cores
START_TIMEOUT_S = 30.0
POLL_S = 0.05
ZOOKEEPER_BACK_S = 30.0  # a restarted or resumed ZooKeeper answers the test within this
SERVING = re.compile(r"serving on (\S+):(\d+) ")
# A session expires at most a tick (500 ms) after its timeout, and the controller's pass
# follows within a watch delivery: this bounds "ZooKeeper has noticed a death".
EXPIRY_S = SESSION_TIMEOUT_MS / 1000 + 8.0


def wait_until(predicate: Callable[[], T | None], what: str, timeout_s: float = WAIT_S) -> T:
    """The first true value of ``predicate``, polled until ``timeout_s``; AssertionError
    naming ``what`` and the last value if none comes."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {timeout_s:.0f} s: {what} (last: {value!r})")
        time.sleep(POLL_S)


def holds_throughout(predicate: Callable[[], bool], what: str, duration_s: float) -> None:
    """``predicate`` is true at every poll for ``duration_s``: how an absence (no unclean
    election, no acknowledgement) is watched for, since it can only be watched for a while."""
    deadline = time.monotonic() + duration_s
    while time.monotonic() < deadline:
        assert predicate(), f"no longer true: {what}"
        time.sleep(POLL_S)


PORT_TAKEN = re.compile(r"cannot listen on \S+: the port is in use")
INTER_BROKER_PORT_TAKEN = re.compile(r"cannot listen for brokers on \S+: the port is in use")
PORT_MOVES_MAX = 3


class BrokerProcess:
    """One ``twinlog serve`` process of the cluster, restartable on the same port.

    Thread rule: the test's thread."""

    def __init__(
        self,
        broker_id: int,
        root: Path,
        zookeeper_hosts: str,
        chroot: str,
        security: ClusterSecurity | None = None,
    ) -> None:
        """``zookeeper_hosts``: ``127.0.0.1:PORT`` (reached through a proxy the test can
        cut), or an ensemble's ``h:p,h:p,...`` (reached directly). ``security``: the
        cluster's credentials (None: an open cluster)."""
        self.broker_id = broker_id
        self.data_dir = root / f"b{broker_id}"
        self.log_path = root / f"b{broker_id}-server.log"
        self.disk_full_flag = root / f"b{broker_id}-disk-full"
        self.port = free_loopback_port()
        self.address = f"127.0.0.1:{self.port}"
        self.zookeeper_link: HoldingProxy | None = None
        self.zookeeper_hosts = zookeeper_hosts
        if "," not in zookeeper_hosts:
            self.zookeeper_link = HoldingProxy(int(zookeeper_hosts.rsplit(":", 1)[1]))
            self.zookeeper_hosts = self.zookeeper_link.address
        self.security = security
        # Where the internal services are served: the inter-broker listener (with broker
        # certificates), else the client port.
        self.inter_broker_port: int | None = free_loopback_port() if security else None
        self.client_inbound = HoldingProxy(self.port)
        self.broker_inbound = (
            HoldingProxy(self.inter_broker_port)
            if self.inter_broker_port is not None
            else self.client_inbound
        )
        self.inbound_link = (
            ProxyGroup(self.client_inbound, self.broker_inbound)
            if self.broker_inbound is not self.client_inbound
            else ProxyGroup(self.client_inbound)
        )
        self.client_link = HoldingProxy(self.client_inbound.port)
        self.chroot = chroot
        self.process: subprocess.Popen[bytes] | None = None
        self.paused = False
        self.starts = 0

    def crash_flag(self, point: str) -> Path:
        """While this file exists, the broker SIGKILLs itself at failpoint ``point``."""
        return self.data_dir.parent / f"b{self.broker_id}-crash-{point}"

    def arm_crash(self, point: str) -> None:
        """Crash at ``point`` (one of CRASH_POINTS) from now on, until ``disarm_crashes``."""
        assert point in CRASH_POINTS, point
        self.crash_flag(point).touch()

    def disarm_crashes(self) -> None:
        for point in CRASH_POINTS:
            self.crash_flag(point).unlink(missing_ok=True)

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def pid(self) -> int:
        assert self.process is not None, f"broker {self.broker_id} never started"
        return self.process.pid

    def exit_status(self) -> int | None:
        """The status it exited with; None while it runs (or never ran)."""
        return None if self.process is None else self.process.poll()

    def start(self) -> None:
        """Spawn it; ``wait_serving`` waits for it. Its old registration must be gone."""
        assert not self.alive, f"broker {self.broker_id} runs already"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        env = environment()
        env[ADVERTISED_PORT_VARIABLE] = str(self.client_link.port)
        env[INTER_BROKER_PORT_VARIABLE] = str(self.broker_inbound.port)
        env[FAILPOINTS_VARIABLE] = ";".join(
            [f"log.before_write=enospc?{self.disk_full_flag}"]
            + [f"{point}=crash?{self.crash_flag(point)}" for point in CRASH_POINTS]
        )
        arguments = [
            sys.executable,
            "-m",
            "twinlog.rpc.cli",
            "serve",
            "--data-dir",
            str(self.data_dir),
            "--port",
            str(self.port),
            "--broker-id",
            str(self.broker_id),
            "--zookeeper",
            f"{self.zookeeper_hosts}{self.chroot}",
            "--zookeeper-session-timeout-ms",
            str(SESSION_TIMEOUT_MS),
        ]
        for key, value in BROKER_CONFIG.items():
            arguments += ["--config", f"{key}={value}"]
        if self.security is not None:
            arguments += [
                "--inter-broker-listener",
                f"127.0.0.1:{self.inter_broker_port}",
                *self.security.broker_arguments(self.broker_id),
            ]
        with self.log_path.open("ab") as log_file:
            log_file.write(f"--- start {self.starts + 1} of broker {self.broker_id}\n".encode())
            log_file.flush()
            self.process = subprocess.Popen(
                arguments, stdout=log_file, stderr=subprocess.STDOUT, cwd=ROOT, env=env
            )
        self.starts += 1
        self.paused = False

    def wait_serving(self) -> None:
        """Wait until it serves. A port another process took between ``free_loopback_port``
        and the bind (an outgoing connection's ephemeral port: ZooKeeper's, a broker's) is
        not the broker's fault: it moves to a fresh port (client port or inter-broker
        listener, whichever was taken), behind the same proxies (clients and peers reach it
        only through them), and starts again, a few times at most."""
        deadline = time.monotonic() + START_TIMEOUT_S
        moves = 0
        while time.monotonic() < deadline:
            started = self.log()[self._log_offset :]
            if SERVING.search(started):
                return
            if not self.alive:
                if PORT_TAKEN.search(started) and moves < PORT_MOVES_MAX:
                    moves += 1
                    self.process = None
                    self.port = free_loopback_port()
                    self.address = f"127.0.0.1:{self.port}"
                    self.client_inbound.target = ("127.0.0.1", self.port)
                    self.start()
                    continue
                if INTER_BROKER_PORT_TAKEN.search(started) and moves < PORT_MOVES_MAX:
                    moves += 1
                    self.process = None
                    self.inter_broker_port = free_loopback_port()
                    self.broker_inbound.target = ("127.0.0.1", self.inter_broker_port)
                    self.start()
                    continue
                break
            time.sleep(POLL_S)
        raise AssertionError(
            f"broker {self.broker_id} did not start (status {self.exit_status()}); log tail:\n"
            f"{self.log()[-4000:]}"
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_since_start(self) -> str:
        return self.log()[self._log_offset :]

    def kill(self) -> None:
        """SIGKILL (a crash; the page cache survives, so this is not a power loss)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)  # a paused one dies too, and is reaped
            self.process.kill()
            self.process.wait(timeout=10)
        self.paused = False

    def stop(self, timeout_s: float = 60.0) -> int:
        """SIGTERM: a controlled shutdown (its leaderships move first), then its exit
        status once it has exited."""
        assert self.process is not None and self.process.poll() is None, "not running"
        self.process.send_signal(signal.SIGTERM)
        return self.wait_exit(timeout_s)

    def pause(self) -> None:
        """SIGSTOP: it notices nothing until ``resume`` (a GC pause, a frozen VM)."""
        os.kill(self.pid, signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        if self.alive:
            os.kill(self.pid, signal.SIGCONT)
        self.paused = False

    def wait_exit(self, timeout_s: float) -> int:
        assert self.process is not None
        try:
            return self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"broker {self.broker_id} still runs after {timeout_s:.0f} s"
            ) from None

    def wipe(self) -> None:
        """Remove its whole data directory (a replaced disk); only while it is down."""
        assert not self.alive, "wipe a broker's disk only while it is down"
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def close(self) -> None:
        self.kill()
        if self.zookeeper_link is not None:
            self.zookeeper_link.close()
        self.client_link.close()
        self.inbound_link.close()


class FaultCluster:
    """Thread rule: the test's thread; ``client`` and ``state`` from any thread."""

    def __init__(
        self,
        root: Path,
        zookeeper_hosts: str,
        name: str,
        *,
        secure: bool = True,
        spare_ids: tuple[int, ...] = (),
    ) -> None:
        """``zookeeper_hosts``: a standalone server's ``127.0.0.1:PORT`` or an ensemble's
        ``h:p,h:p,h:p``; the cluster lives below the chroot ``/twinlog-<name>`` (at the
        top: a parent another cluster made is locked with that cluster's credential).
        ``secure``: tokens, ACLs, broker certificates and the ZooKeeper credential.
        ``spare_ids``: brokers that may join later (``add_broker``), certificates ready."""
        self.root = root
        self.zookeeper_hosts = zookeeper_hosts
        self.chroot = f"/twinlog-{name}"
        self.connect = f"{zookeeper_hosts}{self.chroot}"
        self.security = (
            ClusterSecurity.write(root / "security", BROKER_IDS + spare_ids) if secure else None
        )
        self.brokers = {
            broker_id: BrokerProcess(broker_id, root, zookeeper_hosts, self.chroot, self.security)
            for broker_id in BROKER_IDS
        }
        self.session = ZooKeeperSession(
            self.connect,
            session_timeout_ms=SESSION_TIMEOUT_MS,
            credential=None if self.security is None else self.security.credential,
        )

    def token(self, principal: str = OPERATOR) -> str | None:
        """``principal``'s token (``cluster_security.PRINCIPALS``); None when not secure."""
        return None if self.security is None else self.security.token(principal)

    def client_arguments(self, principal: str = OPERATOR) -> dict[str, Any]:
        """Keyword arguments for a ``Producer``, ``Consumer`` or ``Admin`` of ``principal``."""
        token = self.token(principal)
        return {} if token is None else {"token": token}

    # --- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        self._start_together(list(BROKER_IDS))  # racing to create __consumer_offsets

    def _start_together(self, broker_ids: list[int]) -> None:
        for broker_id in broker_ids:
            self.brokers[broker_id].start()
        for broker_id in broker_ids:
            self.brokers[broker_id].wait_serving()

    def add_broker(self, broker_id: int) -> BrokerProcess:
        """A new broker (one of ``spare_ids``) joins the cluster; it serves when this
        returns. It holds nothing until partitions are moved to it."""
        assert broker_id not in self.brokers, f"broker {broker_id} is in the cluster already"
        broker = BrokerProcess(
            broker_id, self.root, self.zookeeper_hosts, self.chroot, self.security
        )
        self.brokers[broker_id] = broker
        self._start_together([broker_id])
        return broker

    def restart(self, *broker_ids: int, at_once: bool = False) -> None:
        """Start the given (dead) brokers again once their old registrations are gone, as
        a supervisor with a restart delay would; wait until each serves. ``at_once``: as a
        supervisor without a delay: each meets its old registration and waits it out."""
        for broker_id in broker_ids:
            assert not self.brokers[broker_id].alive, f"broker {broker_id} still runs"
        if not at_once:
            wait_until(
                lambda: not (set(broker_ids) & set(self.registered())),
                f"the old registrations of brokers {list(broker_ids)} expired",
                EXPIRY_S + 5,
            )
        self._start_together(list(broker_ids))

    def heal(self) -> None:
        """Undo every fault: links flow, disks have room, paused brokers run, dead ones are
        restarted; then every broker is registered. A broker resumed after its session
        expired exits (EXIT_SESSION_LOST) moments later: it is waited for, and restarted."""
        resumed: list[BrokerProcess] = []
        for broker in self.brokers.values():
            if broker.zookeeper_link is not None:
                broker.zookeeper_link.release()
            broker.inbound_link.release()
            broker.client_link.release()
            broker.disk_full_flag.unlink(missing_ok=True)
            broker.disarm_crashes()
            if broker.paused:
                broker.resume()
                resumed.append(broker)
        if resumed:
            wait_until(
                lambda: all(not b.alive or b.broker_id in self.registered() for b in resumed),
                f"the resumed brokers {[b.broker_id for b in resumed]} registered or exited",
                EXPIRY_S,
            )
        dead = [broker_id for broker_id, broker in self.brokers.items() if not broker.alive]
        if dead:
            self.restart(*dead)
        wait_until(lambda: set(self.registered()) == set(self.brokers), "every broker registered")

    def close(self) -> None:
        for broker in self.brokers.values():
            broker.close()
        self.session.close()

    def dump_logs(self, characters_max: int = 6000) -> str:
        return "\n".join(
            f"--- broker {broker_id} (status {broker.exit_status()}) ---\n"
            f"{broker.log()[-characters_max:]}"
            for broker_id, broker in self.brokers.items()
        )

    # --- what ZooKeeper says -------------------------------------------------------------

    def _read(self, read: Callable[[], T]) -> T:
        """``read()``, again while the test's own session is away (a ZooKeeper fault
        suspends or expires it too; kazoo then connects with a new session)."""
        deadline = time.monotonic() + ZOOKEEPER_BACK_S
        while True:
            try:
                return read()
            except ZooKeeperUnavailableError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(POLL_S)

    def registered(self) -> dict[int, BrokerInfo]:
        return self._read(lambda: live_brokers(self.session))

    def controller(self) -> tuple[int, int] | None:
        """(broker id, controller epoch) of the controller now, or None."""
        holder = self._read(lambda: read_controller(self.session))
        return None if holder is None else (holder[0], holder[1])

    def state(self, topic: str, partition: int = 0) -> PartitionState | None:
        return self._read(lambda: read_partition_state(self.session, topic, partition))

    def wait_state(
        self,
        topic: str,
        predicate: Callable[[PartitionState], bool],
        what: str,
        timeout_s: float = WAIT_S,
        partition: int = 0,
    ) -> PartitionState:
        def probe() -> PartitionState | None:
            state = self.state(topic, partition)
            return state if state is not None and predicate(state) else None

        return wait_until(probe, f"{topic}-{partition}: {what}", timeout_s)

    def in_sync(self, state: PartitionState, broker_ids: tuple[int, ...] = BROKER_IDS) -> bool:
        """Led by a running broker, and the ISR is exactly ``broker_ids``, each member with
        the broker epoch it is registered with now (KIP-903)."""
        registered = self.registered()
        return (
            state.leader in registered
            and self.brokers[state.leader].alive
            and sorted(state.isr_ids) == sorted(broker_ids)
            and all(
                member.broker_id in registered
                and registered[member.broker_id].broker_epoch == member.broker_epoch
                for member in state.isr
            )
        )

    def wait_in_sync(
        self,
        topic: str,
        broker_ids: tuple[int, ...] | None = None,
        timeout_s: float = WAIT_S,
        partition: int = 0,
    ) -> PartitionState:
        """Until the ISR is exactly ``broker_ids`` (None: the partition's replicas, not
        moving), each with its current broker epoch, led by a running broker."""
        return self.wait_state(
            topic,
            lambda state: (
                not state.reassigning
                and self.in_sync(state, state.replicas if broker_ids is None else broker_ids)
            ),
            f"ISR {'its replicas' if broker_ids is None else list(broker_ids)} with their "
            "current broker epochs",
            timeout_s,
            partition,
        )

    def running_leader(self, topic: str, partition: int = 0) -> int | None:
        state = self.state(topic, partition)
        if state is None or state.leader < 0 or not self.brokers[state.leader].alive:
            return None
        return state.leader

    # --- clients ---------------------------------------------------------------------------

    @contextmanager
    def client(
        self,
        broker_id: int,
        request_timeout_ms: int = CLIENT_REQUEST_TIMEOUT_MS,
        principal: str = OPERATOR,
    ) -> Iterator[RemoteBroker]:
        """A client straight to broker ``broker_id`` (never through a proxy), acting as
        ``principal``."""
        remote = RemoteBroker(
            self.brokers[broker_id].address,
            ConnectionOptions(token=self.token(principal), request_timeout_ms=request_timeout_ms),
        )
        try:
            yield remote
        finally:
            remote.close()

    @property
    def bootstrap(self) -> str:
        """Every broker's own address, comma-joined: what a cluster ``Producer`` or
        ``Consumer`` is given. (Metadata then names the addresses brokers advertise, their
        client proxies: such a client is cut with ``client_link``, or with ``inbound_link``
        as brokers are.)"""
        return self.bootstrap_from(BROKER_IDS[0])

    def bootstrap_from(self, broker_id: int) -> str:
        """``bootstrap`` with broker ``broker_id`` first: the broker the client asks first,
        for metadata and FindCoordinator, while it answers."""
        first = self.brokers[broker_id].address
        others = [b.address for b in self.brokers.values() if b.broker_id != broker_id]
        return ",".join([first, *others])

    def create_topic(self, topic: str, partitions: int = 1) -> PartitionState:
        """A topic of replication factor 3, created through any running broker; the state
        of its partition 0 once every replica of every partition is in sync."""
        broker_id = next(b for b, broker in self.brokers.items() if broker.alive)
        with self.client(broker_id, request_timeout_ms=20_000) as remote:
            remote.create_topic(topic, partitions, {"replication.factor": "3"})
        for partition in range(1, partitions):
            self.wait_in_sync(topic, partition=partition)
        return self.wait_in_sync(topic)

    def coordinator(self) -> PartitionState:
        """The state of ``__txn_journal-0`` once it has a running leader: the transaction
        coordinator of every transactional id (the rig has one journal partition)."""
        return self.wait_state(
            TXN_JOURNAL_TOPIC,
            lambda state: state.leader in self.brokers and self.brokers[state.leader].alive,
            "a running coordinator",
        )


def followers(state: PartitionState) -> list[int]:
    """The replicas other than the leader, in assignment order."""
    return [broker_id for broker_id in state.replicas if broker_id != state.leader]


def exited_on_session_loss(status: int | None) -> bool:
    return status == EXIT_SESSION_LOST
