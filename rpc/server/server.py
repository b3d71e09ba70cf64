"""The gRPC server: three services over one broker (and, on a cluster broker, the internal
Replication and Coordination services), TLS, auth, limits, graceful stop.

``RpcServer(broker, config)`` binds and serves any object with the broker API
(``twinlog.Broker`` in production; tests may pass a fake). ``serve()`` is what
``twinlog serve`` runs: open the broker, serve until SIGTERM/SIGINT, then stop
accepting, let in-flight requests finish (``shutdown_grace_ms``), close the
broker (which flushes the logs and closes LMDB).
"""

from __future__ import annotations

import errno
import logging
import os
import signal
import threading
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Protocol, cast

import grpc

from twinlog.engine.base.errors import InvalidConfigError
from twinlog.engine.broker.membership import SOLE_BROKER_ID
from twinlog.rpc.cluster.metadata_source import MetadataSource, StandaloneMetadata
from twinlog.rpc.generated.twinlog.v1 import admin_pb2_grpc, consume_pb2_grpc, produce_pb2_grpc
from twinlog.rpc.policy.acl_store import acl_store_of
from twinlog.rpc.policy.acl_view import live_acl
from twinlog.rpc.policy.auth import Acl, Guard, TokenTable
from twinlog.rpc.replication.broker_identity import BrokerTls
from twinlog.rpc.replication.coordination_locator import LeaderLocator
from twinlog.rpc.replication.coordination_service import (
    add_coordination_service,
    coordination_slots,
)
from twinlog.rpc.replication.internal_guard import InternalGuard
from twinlog.rpc.replication.service import add_replication_service
from twinlog.rpc.server.broker_shutdown import BrokerShutdown
from twinlog.rpc.server.config import ServerConfig
from twinlog.rpc.server.decode import DecodeGuard
from twinlog.rpc.server.health import HealthReporter
from twinlog.rpc.server.inter_broker import (
    InterBrokerDoor,
    InterBrokerFlags,
    InterBrokerServer,
    check_cluster_security,
    internal_guard,
    listener_address,
)
from twinlog.rpc.server.metrics import ServerMetrics
from twinlog.rpc.server.metrics_endpoint import (
    MetricsEndpoint,
    metrics_tls_context,
    read_metrics_token,
)
from twinlog.rpc.server.reflection import ReflectionDoor, enable_reflection
from twinlog.rpc.server.request_observer import RequestObserver
from twinlog.rpc.server.service_admin import AdministrationService
from twinlog.rpc.server.service_consume import ConsumingService
from twinlog.rpc.server.service_produce import ProducingService
from twinlog.rpc.wire.broker_api import BrokerApi

WILDCARD_HOSTS = ("0.0.0.0", "::", "")  # a listener bound to every address
EXIT_INTERRUPTED = 130  # 128 + SIGINT: a server stopped by Ctrl-C, as the CLI's commands
log = logging.getLogger("twinlog.server")

# gRPC's own limit is this much above request_bytes_max: a request just over the limit
# reaches DecodeGuard (rpc.server_decode), which answers BatchTooLargeError naming
# request_bytes_max, with twinlog's metadata. Only a request over the margin too gets
# gRPC's bare RESOURCE_EXHAUSTED, which rpc.errors maps with the same advice.
REQUEST_BYTES_MARGIN = 64 * 1024

# Keepalive (grpc core's doc/keepalive.md). The server pings an idle client now and then,
# so that a client that vanished (host down, partition) frees its stream and long poll...
SERVER_KEEPALIVE_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    # ...and accepts the clients' own pings (every 10 s, even without calls: see
    # rpc.client.remote.KEEPALIVE_OPTIONS). By default it would count a ping more often
    # than every 5 minutes as a strike and close the connection with GOAWAY
    # "too_many_pings"; allow one every 5 s, half the clients' interval.
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
)


def _read(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise InvalidConfigError(f"cannot read {what} {path}: {error.strerror}") from None


def server_credentials(config: ServerConfig) -> grpc.ServerCredentials | None:
    if not config.tls_cert_file or not config.tls_key_file:
        return None
    key = _read(config.tls_key_file, "TLS key file")
    certificate = _read(config.tls_cert_file, "TLS certificate file")
    client_ca = (
        _read(config.tls_client_ca_file, "TLS client CA file")
        if config.tls_client_ca_file
        else None
    )
    return grpc.ssl_server_credentials(
        [(key, certificate)], root_certificates=client_ca, require_client_auth=client_ca is not None
    )


def guard_of(config: ServerConfig, broker: object = None) -> Guard:
    """The server's guard; with ``broker``, its ACL file's grants and those of the broker's
    store together (``acl_view``), else the file's alone (a check of the files)."""
    tokens = TokenTable.load(config.tokens_file) if config.tokens_file else None
    acl: Acl | None = None
    if config.acl_file:
        acl = Acl.load(config.acl_file)
        store = acl_store_of(broker) if broker is not None else None
        if store is not None:
            acl = live_acl(acl.grants, store, config.acl_file)
    return Guard(tokens, acl, mutual_tls=bool(config.tls_client_ca_file))


class RpcServer:
    """Serves one broker. Thread rule: ``start``/``stop`` from the owning thread.

    ``metadata_source`` answers the Metadata call: a cluster broker's ZooKeeper view;
    None (a single node) answers this server as broker 0 leading everything.
    ``inter_broker``: how a cluster broker serves the internal services (``serve`` always
    gives it; None, for in-process tests only, serves them unchecked on the client port)."""

    def __init__(
        self,
        broker: BrokerApi,
        config: ServerConfig,
        metadata_source: MetadataSource | None = None,
        inter_broker: InterBrokerDoor | None = None,
        shutdown: BrokerShutdown | None = None,
    ) -> None:
        self.broker = broker
        self.config = config
        self.stopping = threading.Event()
        guard = guard_of(config, broker)
        self.guard = guard
        options: list[tuple[str, Any]] = [
            ("grpc.max_receive_message_length", config.request_bytes_max + REQUEST_BYTES_MARGIN),
            ("grpc.max_send_message_length", config.fetch_bytes_max + REQUEST_BYTES_MARGIN),
            ("grpc.so_reuseport", 0),  # a second server on the same port must fail, not share
            *SERVER_KEEPALIVE_OPTIONS,
        ]
        stats = getattr(broker, "stats", None)  # the engine's figures (a test fake has none)
        self.metrics = ServerMetrics(stats if callable(stats) else None)
        self._server = grpc.server(
            futures.ThreadPoolExecutor(
                max_workers=config.worker_threads, thread_name_prefix="twinlog-rpc"
            ),
            options=options,
            interceptors=[
                # outermost: it sees the status the client gets, whoever set it
                RequestObserver(self.metrics, guard, config.request_log_slow_ms),
                # unparsable bytes: INVALID_ARGUMENT; over request_bytes_max: BatchTooLargeError
                DecodeGuard(guard, config.request_bytes_max),
                # reflection authenticates its callers as every twinlog call does
                ReflectionDoor(guard),
            ],
        )
        self.health = HealthReporter(self._server)
        if config.reflection:  # the public services, for grpcurl (rpc.server.reflection)
            enable_reflection(self._server)
        self.producing = ProducingService(broker, guard, config)
        produce_pb2_grpc.add_ProducingServicer_to_server(self.producing, self._server)
        self.consuming = ConsumingService(broker, guard, config, self.stopping)
        consume_pb2_grpc.add_ConsumingServicer_to_server(self.consuming, self._server)
        if metadata_source is None:
            metadata_source = StandaloneMetadata(broker, lambda: (self.config.host, self.port))
        admin_pb2_grpc.add_AdministrationServicer_to_server(
            AdministrationService(broker, guard, metadata_source, shutdown=shutdown), self._server
        )
        self.inter_broker: InterBrokerServer | None = None
        door = None
        if not getattr(broker, "is_sole_member", True):  # a cluster broker: followers fetch
            # Other brokers' followers, coordinators and partition leaders call this one;
            # not on a single node (a cluster of one), where nothing does. With broker certificates only on a
            # listener of their own, to brokers only (rpc/server/inter_broker.py).
            door = inter_broker or InterBrokerDoor(InternalGuard())
            if door.tls is None:
                add_replication_service(
                    self._server,
                    cast(Any, broker),
                    response_bytes_max=config.fetch_bytes_max,
                    guard=door.guard,
                )
                add_coordination_service(
                    self._server,
                    cast(Any, broker),
                    door.guard,
                    coordination_slots(config.worker_threads),
                )
        credentials = server_credentials(config)
        try:
            if credentials is None:
                port = self._server.add_insecure_port(config.address)
            else:
                port = self._server.add_secure_port(config.address, credentials)
        except RuntimeError:
            port = 0
        if port == 0:
            raise InvalidConfigError(
                f"cannot listen on {config.address}: the port is in use or the address is "
                "not local; pick another --port (0 picks a free one) or --host"
            )
        self.port: int = port
        self.tls = credentials is not None
        if door is not None and door.tls is not None:  # bound after the client port: a
            # refused client port leaves no listener behind
            self.inter_broker = InterBrokerServer(
                broker,
                door,
                options,
                response_bytes_max=config.fetch_bytes_max,
                worker_threads=config.worker_threads,
            )
        self.metrics_endpoint = (
            MetricsEndpoint(
                self.metrics.registry,
                config.metrics_host,
                config.metrics_port,
                token_file=config.metrics_token_file,
                tls_cert_file=config.metrics_tls_cert_file,
                tls_key_file=config.metrics_tls_key_file,
            )
            if config.metrics_port >= 0
            else None
        )

    @property
    def address(self) -> str:
        host = self.config.host
        return f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"

    def start(self) -> None:
        """Serve; the metrics endpoint (if configured) first, so a port clash starts nothing."""
        if self.metrics_endpoint is not None:
            self.metrics_endpoint.start()
        if self.inter_broker is not None:
            self.inter_broker.start()
        self._server.start()
        self.health.serving()

    def stop(self, grace_ms: int | None = None) -> None:
        """Refuse new calls, give in-flight ones ``grace_ms``, then cancel what is left."""
        self.health.stopping()  # probes see NOT_SERVING during the grace period
        self.stopping.set()  # long polls end at their next slice
        grace = self.config.shutdown_grace_ms if grace_ms is None else grace_ms
        stopped = self._server.stop(grace / 1000)
        # Open produce streams end once what they took is answered, not at the grace's
        # end: a producer's stream is open as long as the producer, idle or not.
        self.producing.end_streams()
        stopped.wait()
        if self.inter_broker is not None:
            self.inter_broker.stop(grace / 1000)
        if self.metrics_endpoint is not None:
            self.metrics_endpoint.stop()


def describe_security(config: ServerConfig, guard: Guard) -> str:
    parts = ["TLS" + (" with client certificates" if guard.mutual_tls else "")]
    if not config.tls_cert_file:
        parts = ["no TLS"]
    if guard.tokens is not None:
        parts.append(f"{len(guard.tokens)} bearer tokens")
    elif not guard.mutual_tls:
        parts.append("no authentication")
    parts.append(f"{len(guard.acl.grants)} ACL grants" if guard.acl else "no ACLs")
    return ", ".join(parts)


def open_broker(
    opener: Callable[..., BrokerApi],
    data_dir: str | os.PathLike[str],
    broker_config: dict[str, Any],
) -> BrokerApi:
    """Open the broker; a file or directory it may not use is one line naming it, no traceback.

    The top of the data directory is checked by the broker itself; a part of it that
    is read-only, or a file where a directory belongs, shows only when recovery
    touches it, as an OSError that names the path.
    """
    try:
        return opener(data_dir, **broker_config)
    except OSError as error:
        where = str(error.filename or data_dir)
        code = errno.errorcode.get(error.errno or 0, str(error.errno))
        reason = error.strerror or str(error)
        if error.errno in (errno.EEXIST, errno.ENOTDIR) and os.path.isfile(where):
            reason = "a file stands where a directory belongs"
        raise InvalidConfigError(
            f"cannot open the broker in {str(data_dir)!r}: {where}: {reason} ({code}); give "
            "this user write access to every file and directory under the data directory, "
            "or move what is in the way"
        ) from None


@dataclass(frozen=True)
class ClusterFlags:
    """``twinlog serve --broker-id N --zookeeper CONNECT [--advertised-host H]
    [--advertised-port P] [--inter-broker-host H] [--inter-broker-port P]``."""

    broker_id: int
    zookeeper: str
    advertised_host: str | None = None
    session_timeout_ms: int = 6000
    advertised_port: int | None = None
    inter_broker_host: str | None = None
    inter_broker_port: int | None = None
    # where brokers call this one, and with which certificates (rpc/server/inter_broker.py)
    inter_broker: InterBrokerFlags = field(default_factory=InterBrokerFlags)
    # ZooKeeper credentials file (docs/zookeeper.md); None: world-open znodes
    zookeeper_auth_file: str | None = None


@dataclass(frozen=True)
class ServedCluster:
    """The cluster a served broker is a member of, as a front end beside the gRPC server
    needs it: the broker's id and the metadata source the server answers from."""

    broker_id: int
    metadata_source: MetadataSource


class FrontEnd(Protocol):
    """Another front end on the served broker (the CLI's Kafka listener, a floor above
    this one): bound when made, so that a cluster broker registers its address
    (``kafka_address``) before it serves; serving from ``start()`` to ``stop()``."""

    @property
    def kafka_address(self) -> tuple[str, int] | None: ...  # None: it is not Kafka's

    def start(self) -> None: ...

    def stop(self) -> None: ...


def serve(
    data_dir: str | os.PathLike[str],
    config: ServerConfig,
    broker_config: dict[str, Any],
    cluster: ClusterFlags | None = None,
    open_beside: Callable[[BrokerApi, ServedCluster | None, ServerMetrics], FrontEnd] | None = None,
) -> int:
    """Run a broker and its server until SIGTERM or SIGINT; return the exit status.
    With ``cluster``, the broker joins that cluster (``cluster_member``). ``open_beside``
    opens another front end on the same broker once the server serves (given the
    cluster, if any); a cluster broker registers its address, then it starts. It is
    stopped before the server stops."""
    from twinlog.engine.base import extensions
    from twinlog.engine.base.allocator import keep_freed_memory
    from twinlog.engine.base.collector import freeze_startup_objects
    from twinlog.engine.base.cpu_affinity import pin_threads
    from twinlog.engine.base.crc32c import IMPLEMENTATION, USING_C_EXTENSION
    from twinlog.engine.broker.broker import Broker  # the engine is only needed by a real server

    warning = config.check_exposure()
    if warning:
        log.warning("%s", warning)
    # Read the tokens, ACL and TLS files now: a typo in one must not cost a broker
    # recovery first (RpcServer reads them again; they are small).
    guard_of(config)
    server_credentials(config)
    if config.metrics_port >= 0:  # a bad metrics token or certificate: before recovery too
        if config.metrics_token_file:
            read_metrics_token(config.metrics_token_file)
        if config.metrics_tls_cert_file and config.metrics_tls_key_file:
            metrics_tls_context(config.metrics_tls_cert_file, config.metrics_tls_key_file)
    broker_tls = None
    if cluster is not None:
        check_cluster_security(
            config, cluster.inter_broker, zookeeper_locked=cluster.zookeeper_auth_file is not None
        )
        listener_address(cluster.inter_broker, config)  # a malformed flag: before recovery
        files = cluster.inter_broker.tls_files
        if files is not None:
            broker_tls = BrokerTls.load(cluster.broker_id, *files)
    try:
        # Before the broker and gRPC start their threads: each inherits its creator's CPUs.
        cpus = pin_threads(config.cpu_affinity, cluster.broker_id if cluster else 0)
    except ValueError as error:
        raise InvalidConfigError(str(error)) from None
    settings = (
        f"crc32c: {IMPLEMENTATION}; hot loops: {extensions.describe()}; {keep_freed_memory()}; "
        f"{cpus}"
    )
    if not USING_C_EXTENSION and IMPLEMENTATION.startswith("crcmod"):
        log.warning(
            "crcmod runs without its C extension: every CRC check is ~45x slower. Install "
            "the fast CRC (pip install 'twinlog[fast]') or reinstall crcmod with a C compiler "
            "and the Python headers available "
            "(pip install --force-reinstall --no-binary crcmod crcmod)"
        )
    stop_requested = threading.Event()
    signals_seen = []

    def on_signal(number: int, frame: FrameType | None) -> None:
        signals_seen.append(number)
        stop_requested.set()

    previous = {
        number: signal.signal(number, on_signal) for number in (signal.SIGTERM, signal.SIGINT)
    }
    session = None
    opener: Callable[..., Any] = Broker.open
    metadata_source: MetadataSource | None = None
    locator: LeaderLocator | None = None
    try:
        if cluster is not None:
            from twinlog.engine.zookeeper.cluster_view import ZooKeeperClusterView
            from twinlog.rpc.cluster.joining import join_zookeeper
            from twinlog.rpc.cluster.leader_locator import ZooKeeperLeaderLocator

            session, opener = join_zookeeper(
                data_dir,
                broker_config,
                cluster.zookeeper,
                cluster.broker_id,
                cluster.session_timeout_ms,
                cluster.zookeeper_auth_file,
            )
            # The broker's one view of its cluster: its Metadata and FindCoordinator answers
            # (both front doors), and one leader locator whose cache the internal checks
            # and the coordination clients share.
            metadata_source = ZooKeeperClusterView(session)
            locator = ZooKeeperLeaderLocator(session)
        log.info("opening broker in %s", data_dir)
        broker = open_broker(opener, data_dir, broker_config)
        member = None
        beside: FrontEnd | None = None
        try:
            door = None
            if cluster is not None and session is not None and locator is not None:
                offsets_partition_of = cast(Any, broker).group_offsets.partition_for
                door = InterBrokerDoor(
                    internal_guard(session, locator, offsets_partition_of, broker_tls is not None),
                    broker_tls,
                    None if broker_tls is None else listener_address(cluster.inter_broker, config),
                )
            shutdown = BrokerShutdown(
                SOLE_BROKER_ID if cluster is None else cluster.broker_id,
                lambda: on_signal(signal.SIGTERM, None),  # as a service manager's stop
            )
            server = RpcServer(broker, config, metadata_source, door, shutdown)
            if cluster is not None:
                # Served before it has rejoined (a broker restarted at once waits out its
                # old session): until it is told its roles, "not the coordinator" is
                # "loading" (retry here), since ZooKeeper may still name it.
                cast(Any, broker).roles_known.clear()
            server.start()
            if open_beside is not None:
                served = None
                if cluster is not None and metadata_source is not None:
                    served = ServedCluster(cluster.broker_id, metadata_source)
                beside = open_beside(broker, served, server.metrics)
            if cluster is not None and session is not None and locator is not None:
                from twinlog.rpc.cluster.cluster_member import (
                    INTER_BROKER_PORT_VARIABLE,
                    ClusterMember,
                    registered_port,
                )

                host = cluster.advertised_host or config.host
                inter_broker_host = cluster.inter_broker_host
                inter_broker_port = cluster.inter_broker_port
                if server.inter_broker is not None:  # brokers call its own listener
                    bound = server.inter_broker.host
                    if bound in WILDCARD_HOSTS:  # not an address anyone can reach
                        bound = host
                    inter_broker_host = inter_broker_host or bound
                    if inter_broker_port is None:
                        inter_broker_port = registered_port(
                            server.inter_broker.port, None, INTER_BROKER_PORT_VARIABLE
                        )
                member = ClusterMember(
                    cast(Any, broker),
                    session,
                    locator,
                    host,
                    server.port,
                    advertised_port=cluster.advertised_port,
                    inter_broker_host=inter_broker_host,
                    inter_broker_port=inter_broker_port,
                    kafka_address=None if beside is None else beside.kafka_address,
                    tls=broker_tls,
                )
            # Start-up is done: what it made lives as long as the server does.
            settings += f"; {freeze_startup_objects()}"
            log.info(
                "serving on %s (%s; %s); stop with SIGTERM or Ctrl-C",
                server.address,
                describe_security(config, server.guard),
                settings,
            )
            if server.metrics_endpoint is not None:
                log.info("metrics on %s", server.metrics_endpoint.url)
            if beside is not None:
                beside.start()
            while not stop_requested.wait(1.0):
                pass
            log.info(
                "%s received: refusing new requests, finishing in-flight ones (up to %d ms)",
                signal.Signals(signals_seen[0]).name,
                config.shutdown_grace_ms,
            )
            # A second signal during the grace period cuts it short.
            for number in (signal.SIGTERM, signal.SIGINT):
                signal.signal(number, lambda *_: server.stop(0))
            if member is not None:
                log.info("moving leaderships away (controlled shutdown)")
                cast(Any, broker).stop_beginning_transactions()
                member.close()
                member = None
            if beside is not None:
                beside.stop()
                beside = None
            server.stop()
        finally:
            if beside is not None:
                beside.stop()
            if member is not None:
                member.close(controlled=False)
            log.info("closing broker (flushing logs, closing the journal)")
            broker.close()
        log.info("stopped cleanly")
        # Ctrl-C ends with 130 as every other command does (and as a JVM's Kafka or ZooKeeper
        # does); SIGTERM is how a service manager asks for a stop, and a clean one is success.
        return EXIT_INTERRUPTED if signals_seen[0] == signal.SIGINT else 0
    finally:
        if session is not None:
            session.close()
        for number, handler in previous.items():
            signal.signal(number, handler)
