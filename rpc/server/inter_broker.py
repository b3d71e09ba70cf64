"""The inter-broker door: where a cluster broker serves Replication and Coordination, and to whom.

    twinlog serve ... --broker-id 1 --zookeeper ZK \\
        --inter-broker-listener 127.0.0.1:7071 \\
        --inter-broker-tls-cert broker-1.pem --inter-broker-tls-key broker-1.key \\
        --inter-broker-tls-ca cluster-ca.pem

With broker certificates (``InterBrokerFlags.tls``) the internal services get a listener
of their own, bound separately (Kafka's inter-broker listener), whose TLS requires a client
certificate the cluster CA signed; ``InternalGuard`` then requires a broker's name in it,
and the client port does not serve them at all (a client with any token is refused:
UNIMPLEMENTED). Without certificates they are served on the client port, as before,
which ``check_cluster_security`` allows only while clients need no credentials either: a
cluster started with tokens, ACLs or client certificates refuses to start without broker
certificates, saying what to add.

Every refusal at the door is audited (``internal.refused``) with the peer, the broker its
certificate names (if any) and why.

Thread rule: ``start``/``stop`` from the owning thread.
"""

from __future__ import annotations

from concurrent import futures
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import grpc

from twinlog.engine.base.addresses import join_host_port, parse_host_port
from twinlog.engine.base.errors import InvalidConfigError, TwinlogError
from twinlog.engine.base.types import TopicPartition
from twinlog.rpc.policy.audit import audit
from twinlog.rpc.replication.broker_identity import BrokerTls
from twinlog.rpc.replication.coordination_locator import LeaderLocator
from twinlog.rpc.replication.coordination_service import (
    add_coordination_service,
    coordination_slots,
)
from twinlog.rpc.replication.internal_checks import InternalCallChecks, RegisteredEpochs
from twinlog.rpc.replication.internal_guard import InternalGuard
from twinlog.rpc.replication.service import add_replication_service
from twinlog.rpc.server.config import ServerConfig

if TYPE_CHECKING:
    from twinlog.engine.zookeeper.session import ZooKeeperSession


@dataclass(frozen=True)
class InterBrokerFlags:
    """``--inter-broker-listener HOST:PORT`` and the three ``--inter-broker-tls-*`` files."""

    listener: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_ca_file: str | None = None

    @property
    def tls_files(self) -> tuple[str, str, str] | None:
        files = (self.tls_cert_file, self.tls_key_file, self.tls_ca_file)
        given = [name for name in files if name]
        if not given:
            return None
        if len(given) != 3:
            raise InvalidConfigError(
                "give all three of --inter-broker-tls-cert, --inter-broker-tls-key and "
                "--inter-broker-tls-ca (this broker's certificate and key, the cluster CA), "
                "or none"
            )
        return (given[0], given[1], given[2])


def check_cluster_security(
    config: ServerConfig, flags: InterBrokerFlags, zookeeper_locked: bool = False
) -> None:
    """A cluster whose clients need credentials (or whose ZooKeeper is locked) needs
    brokers that do too: refuse to start otherwise, before anything is opened or written."""
    files = flags.tls_files
    clients_authenticate = bool(config.tokens_file or config.acl_file or config.tls_client_ca_file)
    if (clients_authenticate or zookeeper_locked) and files is None:
        what = (
            "credentials of its clients (tokens, ACLs or client certificates)"
            if clients_authenticate
            else "a ZooKeeper credential (--zookeeper-auth-file)"
        )
        raise InvalidConfigError(
            f"this cluster broker requires {what} but would serve its internal services "
            "(replication, coordination) to anyone who reaches its port: add "
            "--inter-broker-tls-cert, "
            "--inter-broker-tls-key and --inter-broker-tls-ca (make them with "
            "'twinlog cluster certs'; see 'Securing a cluster' in docs/operations.md)"
        )
    if flags.listener and files is None:
        raise InvalidConfigError(
            "--inter-broker-listener serves the internal services to brokers only, which "
            "needs their certificates: add --inter-broker-tls-cert, --inter-broker-tls-key "
            "and --inter-broker-tls-ca"
        )


def listener_address(flags: InterBrokerFlags, config: ServerConfig) -> tuple[str, int]:
    """Where the inter-broker listener binds: the flag's HOST:PORT, else the client
    host and a free port (registered in ZooKeeper, so brokers find it)."""
    if not flags.listener:
        return config.host, 0
    return parse_host_port(
        flags.listener, "--inter-broker-listener", any_port=True, example="127.0.0.1:7071"
    )


def audit_refusal(method: str, peer: str, caller: int | None, error: TwinlogError) -> None:
    audit(
        "internal.refused",
        method=method,
        peer=peer,
        broker="none" if caller is None else caller,
        error=type(error).__name__,
        reason=str(error),
    )


def internal_guard(
    session: ZooKeeperSession,
    locator: LeaderLocator,
    offsets_partition_of: Any,
    brokers_authenticate: bool,
) -> InternalGuard:
    """The checks against ZooKeeper every internal call of a cluster broker passes;
    ``locator``: the broker's one (``rpc.cluster.leader_locator``), its cache shared with
    the coordination clients."""
    from twinlog.engine.zookeeper.broker_registration import live_brokers

    def registered() -> dict[int, int]:
        return {broker_id: info.broker_epoch for broker_id, info in live_brokers(session).items()}

    def offsets_partition(group_id: str) -> TopicPartition:
        found: TopicPartition = offsets_partition_of(group_id)
        return found

    checks = InternalCallChecks(locator, RegisteredEpochs(registered), offsets_partition)
    return InternalGuard(
        checks, brokers_authenticate=brokers_authenticate, on_refused=audit_refusal
    )


@dataclass(frozen=True)
class InterBrokerDoor:
    """How a cluster broker's server serves the internal services: ``tls`` and ``address``
    set, on a listener of their own; neither, on the client port."""

    guard: InternalGuard
    tls: BrokerTls | None = None
    address: tuple[str, int] | None = None


class InterBrokerServer:
    """The internal services on their own port, to brokers only (mutual TLS)."""

    def __init__(
        self,
        broker: Any,
        door: InterBrokerDoor,
        options: list[tuple[str, Any]],
        response_bytes_max: int,
        worker_threads: int,
    ) -> None:
        """``worker_threads``: the client server's count; coordination calls may take all
        but a reserve for replica fetches (``coordination_slots``)."""
        assert door.tls is not None and door.address is not None
        self._server = grpc.server(
            futures.ThreadPoolExecutor(
                max_workers=worker_threads, thread_name_prefix="twinlog-inter-broker"
            ),
            options=options,
        )
        add_replication_service(
            self._server, broker, response_bytes_max=response_bytes_max, guard=door.guard
        )
        add_coordination_service(
            self._server, broker, door.guard, coordination_slots(worker_threads)
        )
        host, port = door.address
        address = join_host_port(host, port)
        try:
            bound = self._server.add_secure_port(address, door.tls.server_credentials())
        except RuntimeError:
            bound = 0
        if bound == 0:
            raise InvalidConfigError(
                f"cannot listen for brokers on {address}: the port is in use or the address "
                "is not local; pick another --inter-broker-listener (port 0 picks a free one)"
            )
        self.host = host
        self.port = bound

    @property
    def address(self) -> str:
        return join_host_port(self.host, self.port)

    def start(self) -> None:
        self._server.start()

    def stop(self, grace_s: float) -> None:
        self._server.stop(grace_s).wait()
