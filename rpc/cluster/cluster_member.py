"""A broker's membership of a cluster: registration, controller, roles, fetchers, ISR writes.

    twinlog serve --data-dir d1 --broker-id 1 --zookeeper 127.0.0.1:2181/twinlog/dev

``ClusterMember`` joins a running broker (``Broker.open(..., broker_id=N)`` on the
ZooKeeper metadata store) to its cluster (CLUSTER.md §3.1, §3.2):

    register      EPHEMERAL brokers/ids/<N> {host, port, data_dir_id[, kafka_host,
                  kafka_port]}; its czxid is the
                  broker epoch every fetch of this broker carries (KIP-380)
    controller    every broker runs one; ZooKeeper elects one (engine.zookeeper.controller)
    roles         the state znodes of this broker's partitions, each change handed to
                  ``Broker.take_partition_role``; a follower's fetcher thread per leader
    coordination  the broker's coordinator <-> partition calls, and its group
                  coordinators' calls to transaction coordinators, go to the broker that
                  leads the partition or coordinator (``coordination_client``)
    ISR writes    every ``isr_interval_s`` the led partitions' due ISR changes (KIP-497),
                  written by a set conditional on the state's zkVersion
    session loss  SUSPENDED: no ZooKeeper-dependent action (the watchers and the ISR loop
                  pause); LOST: the process exits (crash-only, I11): its supervisor
                  restarts it into the recovery every SIGKILL test exercises
    close         controlled shutdown first (leaderships move away), then everything stops

The registration carries the address clients reach the broker at: ``--advertised-host``
and ``--advertised-port`` (default: the port the server listens on), as Kafka's
advertised.listeners, for a proxy or NAT in between; and, when other brokers must use
another one (Kafka's inter-broker listener), ``--inter-broker-host`` /
``--inter-broker-port`` (default: the advertised address). The environment variables
``TWINLOG_ADVERTISED_PORT`` and ``TWINLOG_INTER_BROKER_PORT`` do the same when the flags
are not given (the fault tests put TCP proxies in front of a broker that way, one for
clients and one for brokers, docs/testing-cluster.md).

Thread rule: ``close`` from the owner; the callbacks come on the watchers' threads.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence

from twinlog.engine.base.addresses import parse_port
from twinlog.engine.base.errors import ConditionalWriteLostError, TwinlogError
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.broker import Broker
from twinlog.engine.broker.leader_elections import ElectionResult
from twinlog.engine.broker.reassignments import MoveResult, PartitionMove, Reassignment
from twinlog.engine.zookeeper.broker_registration import (
    BrokerInfo,
    live_brokers,
    register_broker,
)
from twinlog.engine.zookeeper.controlled_shutdown import request_controlled_shutdown
from twinlog.engine.zookeeper.controller import Controller
from twinlog.engine.zookeeper.partition_roles import PartitionRoles, change_isr
from twinlog.engine.zookeeper.partition_state import IsrMember, PartitionState
from twinlog.engine.zookeeper.preferred_election import request_preferred_election
from twinlog.engine.zookeeper.reassignment_request import (
    request_reassignment,
    running_reassignments,
)
from twinlog.engine.zookeeper.session import ZooKeeperSession, ZooKeeperUnavailableError
from twinlog.engine.zookeeper.topic_config_watch import TopicConfigWatch
from twinlog.rpc.replication.broker_identity import BrokerTls
from twinlog.rpc.replication.coordination_client import (
    RemotePartitionLeaders,
    RemoteTransactionCoordinators,
)
from twinlog.rpc.replication.coordination_locator import LeaderLocator
from twinlog.rpc.replication.fetcher import ReplicaFetchers

log = logging.getLogger("twinlog.cluster")

ISR_INTERVAL_S = 0.5
CONTROLLED_SHUTDOWN_TIMEOUT_MS = 10_000
# Then the longest wait for the roles thread to read the moved leaderships (a full read
# of this broker's partitions takes well under a second on a healthy ensemble).
CONTROLLED_SHUTDOWN_READ_S = 5.0
EXIT_SESSION_LOST = 3
ADVERTISED_PORT_VARIABLE = "TWINLOG_ADVERTISED_PORT"
INTER_BROKER_PORT_VARIABLE = "TWINLOG_INTER_BROKER_PORT"


def registered_port(
    listening_port: int, flag: int | None = None, variable: str = ADVERTISED_PORT_VARIABLE
) -> int:
    """The port to register: the flag if given, else ``$variable`` (a proxy's, in a fault
    test), else ``listening_port``."""
    if flag is not None:
        return flag
    text = os.environ.get(variable, "").strip()
    if not text:
        return listening_port
    return parse_port(text, variable, otherwise=f"or unset it to use {listening_port}")


def exit_on_session_loss() -> None:
    """Crash-only (CLUSTER.md §3.2): a broker whose session expired may have been replaced
    in every role it held; it exits at once, and its supervisor restarts it."""
    log.critical(
        "the ZooKeeper session is lost: exiting (status %d); restart the broker, it "
        "rejoins as a follower of every partition",
        EXIT_SESSION_LOST,
    )
    logging.shutdown()
    os._exit(EXIT_SESSION_LOST)


class ClusterMember:
    def __init__(
        self,
        broker: Broker,
        session: ZooKeeperSession,
        locator: LeaderLocator,
        host: str,
        port: int,
        *,
        on_lost: Callable[[], None] = exit_on_session_loss,
        isr_interval_s: float = ISR_INTERVAL_S,
        advertised_port: int | None = None,
        inter_broker_host: str | None = None,
        inter_broker_port: int | None = None,
        kafka_address: tuple[str, int] | None = None,
        tls: BrokerTls | None = None,
    ) -> None:
        """``locator``: the broker's one leader locator (``leader_locator``), whose cache
        the coordination clients share with the internal checks; ``host``/``port`` (or
        ``advertised_port``): where clients reach this broker;
        ``inter_broker_*``: where other brokers do, when not there; ``kafka_address``:
        where Kafka clients reach its Kafka listener, when it has one; ``tls``: this
        broker's certificate, which its calls to other brokers present."""
        assert broker.broker_id is not None, "a cluster member's broker has a broker_id"
        self.broker = broker
        self.broker_id = broker.broker_id
        self.session = session
        self.locator = locator
        self.isr_interval_s = isr_interval_s
        self.tls = tls
        self._stopping = threading.Event()
        self._brokers: dict[int, BrokerInfo] = {}
        self._brokers_lock = threading.Lock()
        advertised = registered_port(port, advertised_port)
        inter_broker_at = registered_port(0, inter_broker_port, INTER_BROKER_PORT_VARIABLE)
        inter_broker = None  # neither given: brokers use the advertised address too
        if inter_broker_host or inter_broker_at:
            inter_broker = (inter_broker_host or host, inter_broker_at or advertised)
        self.registration = register_broker(
            session,
            self.broker_id,
            host,
            advertised,
            broker.metadata.data_dir_id,
            inter_broker,
            kafka_address,
        )
        broker.broker_epoch = self.registration.broker_epoch
        log.info(
            "registered as broker %d at %s for clients, %s for brokers (broker epoch %d)",
            self.broker_id,
            self.registration.info.address,
            self.registration.info.inter_broker_address,
            self.registration.broker_epoch,
        )
        self.fetchers = ReplicaFetchers(broker, self._address_of, tls=tls)
        self._join_coordination()
        broker.membership = self  # what gives the broker's partitions their roles
        self.roles = PartitionRoles(
            session,
            self.broker_id,
            self._take_role,
            on_lost=on_lost,
            on_first_read=broker.roles_known.set,
        )
        settings = broker.config
        self.controller = Controller(
            session,
            self.broker_id,
            on_lost=on_lost,
            auto_leader_rebalance=settings.auto_leader_rebalance_enable,
            leader_imbalance_percentage=settings.leader_imbalance_per_broker_percentage,
            leader_imbalance_check_interval_s=settings.leader_imbalance_check_interval_ms / 1000,
        )
        self._isr_thread = threading.Thread(
            target=self._write_isr_changes, name="twinlog-isr-changes", daemon=True
        )
        # Topic settings changed through any broker reach this one's replicas.
        self.topic_configs = TopicConfigWatch(session, self._topic_config_changed)
        self.roles.start()
        self.controller.start()
        self.topic_configs.start()
        self._isr_thread.start()

    # --- coordination (coordinator <-> partition calls, docs/seam.md) ------------------

    def _join_coordination(self) -> None:
        """From now on the broker's coordinators reach partitions led elsewhere, and its
        partitions and group coordinators the transaction coordinators elsewhere, over gRPC
        (``coordination_client``); what this broker leads or coordinates is still called
        in-process."""
        locator = self.locator
        self.partition_leaders = RemotePartitionLeaders(
            self.broker_id,
            self.broker.local_partition_leaders,
            locator,
            self._address_of,
            tls=self.tls,
        )
        self.transaction_coordinators = RemoteTransactionCoordinators(
            self.broker_id, self.broker.here_coordinators, locator, self._address_of, tls=self.tls
        )
        self.broker.partition_leaders = self.partition_leaders
        self.broker.transaction_coordinators = self.transaction_coordinators

    # --- roles (``engine.broker.membership.Membership``) --------------------------------

    def check_replication_factor(self, topic: str, replication_factor: int) -> None:
        """ZooKeeper's metadata store refuses a factor above the brokers live then."""
        return None

    def topic_created(self, topic: str, partitions: int, first: int = 0) -> None:
        """The controller gives the new partitions their roles (a ZooKeeper watch)."""
        return None

    def elect_preferred_leaders(
        self, partitions: Sequence[TopicPartition] | None, timeout_ms: int
    ) -> list[ElectionResult]:
        """Asked of the controller through ZooKeeper (``preferred_election``)."""
        asked = None if partitions is None else [(p.topic, p.partition) for p in partitions]
        return request_preferred_election(self.session, asked, timeout_ms)

    def reassign_partitions(
        self, moves: Sequence[PartitionMove], throttle_bytes_per_s: int, timeout_ms: int
    ) -> list[MoveResult]:
        """Asked of the controller through ZooKeeper (``reassignment_request``)."""
        return request_reassignment(self.session, moves, throttle_bytes_per_s, timeout_ms)

    def running_reassignments(self) -> list[Reassignment]:
        return running_reassignments(self.session)

    def _topic_config_changed(self, topic: str) -> None:
        changed = self.broker.topic_config_changed(topic)
        if changed:
            log.info("topic %s: its changed settings applied to %d partitions", topic, changed)

    def _take_role(self, topic: str, partition: int, state: PartitionState) -> None:
        if self.broker_id not in state.replicas:  # moved away by a reassignment, or never here
            try:
                self.broker.drop_partition_replica(
                    TopicPartition(topic, partition), state.leader_epoch
                )
            except TwinlogError as error:
                log.error("%s-%d: could not drop this broker's copy: %s", topic, partition, error)
            return
        if state.leader < 0:
            log.warning(
                "%s-%d is offline (no in-sync replica alive; ISR %s): it waits for one",
                topic,
                partition,
                list(state.isr_ids),
            )
            return
        isr = {member.broker_id: member.broker_epoch for member in state.isr}
        # Only a new replica catching up is throttled, and from its first fetch: set before
        # the role, which starts the fetching.
        throttled = self.broker_id in state.adding
        try:
            self.broker.partition(TopicPartition(topic, partition)).set_fetch_throttle(
                state.throttle_bytes_per_s if throttled else 0
            )
            self.broker.take_partition_role(
                TopicPartition(topic, partition),
                state.leader,
                state.leader_epoch,
                state.replicas,
                isr,
            )
        except TwinlogError as error:  # a topic deleted meanwhile, a full disk: say, go on
            log.error("%s-%d: could not take its role: %s", topic, partition, error)
            return
        if state.leader != self.broker_id:
            self.fetchers.ensure(state.leader)

    def _address_of(self, broker_id: int) -> str | None:
        info = self._live_brokers(refresh=False).get(broker_id)
        if info is None:
            info = self._live_brokers(refresh=True).get(broker_id)
        return None if info is None else info.inter_broker_address

    def _live_brokers(self, refresh: bool) -> dict[int, BrokerInfo]:
        with self._brokers_lock:
            if refresh or not self._brokers:
                try:
                    self._brokers = live_brokers(self.session)
                except ZooKeeperUnavailableError as error:
                    log.warning("live brokers not read: %s", error)
            return dict(self._brokers)

    # --- ISR changes (KIP-497) ----------------------------------------------------------

    def _write_isr_changes(self) -> None:
        while not self._stopping.wait(self.isr_interval_s):
            if self.session.suspended or self.session.lost:
                continue  # I11: nothing that needs ZooKeeper while it is away
            try:
                self._write_isr_changes_once()
            except Exception:  # the loop must outlive one bad round; say it loudly
                log.exception("ISR changes: a round failed")

    def _write_isr_changes_once(self) -> None:
        registered = {
            broker_id: info.broker_epoch
            for broker_id, info in self._live_brokers(refresh=True).items()
        }
        states = self.roles.states()
        for topic_partition, leader_epoch, change in self.broker.isr_changes_due(registered):
            state = states.get((topic_partition.topic, topic_partition.partition))
            if (
                state is None
                or state.leader != self.broker_id
                or state.leader_epoch != leader_epoch
            ):
                self.broker.isr_change_done(topic_partition, None)
                continue
            members = [IsrMember(broker_id, epoch) for broker_id, epoch in change.isr.items()]
            try:
                change_isr(
                    self.session,
                    topic_partition.topic,
                    topic_partition.partition,
                    members,
                    state.version,
                )
            except (ConditionalWriteLostError, ZooKeeperUnavailableError) as error:
                log.info("%s: ISR change not written: %s", topic_partition, error)
                self.broker.isr_change_done(topic_partition, None)
                continue
            log.info(
                "%s: ISR %s -> %s (added %s, removed %s)",
                topic_partition,
                sorted(state.isr_ids),
                sorted(change.isr),
                sorted(change.added),
                sorted(change.removed),
            )
            self.broker.isr_change_done(topic_partition, change.isr)

    # --- the end --------------------------------------------------------------------------

    def close(self, controlled: bool = True) -> None:
        """Move leaderships away first (``controlled``: a rolling restart loses no
        availability), then stop every thread."""
        if controlled and not (self.session.suspended or self.session.lost):
            try:
                left = request_controlled_shutdown(
                    self.session, self.broker_id, CONTROLLED_SHUTDOWN_TIMEOUT_MS
                )
                if left:
                    log.warning("controlled shutdown: still leading %s", left)
                # ZooKeeper says the leaderships moved; step down now, before the close,
                # not answer as leader and coordinator until the roles thread stops.
                if not self.roles.read_now(CONTROLLED_SHUTDOWN_READ_S):
                    log.warning(
                        "controlled shutdown: the partitions' new roles were not read within "
                        "%.0f s (ZooKeeper slow or away); closing anyway",
                        CONTROLLED_SHUTDOWN_READ_S,
                    )
            except TwinlogError as error:
                log.warning("controlled shutdown failed: %s", error)
        self._stopping.set()
        self.topic_configs.close()
        self.controller.close()
        self.roles.close()
        self.fetchers.close()
        # Closed, not swapped back to the in-process calls: those would answer a partition
        # this broker does not hold as deleted. Calls to other brokers now fail retriably;
        # a commit cut short is completed again after the restart (its decision is durable).
        self.partition_leaders.close()
        self.transaction_coordinators.close()
        self._isr_thread.join(5)
