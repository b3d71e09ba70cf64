"""A cluster with every lock on, for the tests that attack it: three ``twinlog serve``
processes with client TLS, bearer tokens, an ACL file, broker certificates (the internal
services on their own mutual-TLS listener) and a ZooKeeper credential.

    with running_secure_cluster(tmp_path, zookeeper) as cluster:
        cluster.options("alice")           # ConnectionOptions: alice's token, the client CA
        cluster.inter_broker_address(2)    # where broker 2 serves brokers (from ZooKeeper)
        cluster.internal_channel(2, "stranger")  # a TLS channel as someone else
        cluster.fingerprint()              # hashes of every data directory and znode

Principals: ``admin`` (everything, internal topics too), ``alice`` and ``bob`` (their own
topics, transactional ids and groups), ``mallory`` (a valid token and nothing granted).
``pki`` has the cluster CA's folder (``certs/``: ca.pem, ca.key, broker-N.pem/.key) and
``client_pki`` the client port's (``make_pki``: server.pem for 127.0.0.1, client CA).

No tests here. Thread rule: the test's thread.
"""

from __future__ import annotations

import datetime
import hashlib
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
from pki_support import make_pki
from server_process import ServerProcess

from twinlog.engine.zookeeper.broker_registration import live_brokers
from twinlog.engine.zookeeper.credentials import (
    ZooKeeperCredential,
    ensure_zookeeper_credential_file,
)
from twinlog.engine.zookeeper.partition_state import PartitionState, read_partition_state
from twinlog.engine.zookeeper.session import ZooKeeperSession
from twinlog.rpc.cli.cluster_certs import make_broker_certificates
from twinlog.rpc.cli.local_zookeeper import LocalZooKeeper
from twinlog.rpc.client.connection_options import ConnectionOptions

SESSION_TIMEOUT_MS = 4000
# Coordinator checkpoints only every 10 minutes: an idle cluster then writes nothing, so
# an attack's effect (or its absence) shows in the files' hashes.
BROKER_SETTINGS = (
    "replica_lag_time_max_ms=6000",
    "replica_ack_timeout_ms=10000",
    "checkpoint_interval_ms=600000",
)
TOKENS = {
    "admin": "admin-0123456789abcdef",
    "alice": "alice-0123456789abcdef",
    "bob": "bob-0123456789abcdef00",
    "mallory": "mallory-0123456789abcd",
}
ACL = """
admin    all       *
admin    all       __*
admin    all       transactional-id:*
admin    all       group:*
alice    all       alice-*
alice    all       transactional-id:alice-*
alice    all       group:alice-*
bob      all       bob-*
bob      all       transactional-id:bob-*
bob      all       group:bob-*
"""


def make_client_certificate(certs: Path, common_name: str, into: Path) -> tuple[Path, Path]:
    """A certificate for ``common_name`` signed by the CA in ``certs`` (a client that is
    no broker, yet holds the cluster CA's signature): its .pem and .key in ``into``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    ca = x509.load_pem_x509_certificate((certs / "ca.pem").read_bytes())
    ca_key = serialization.load_pem_private_key((certs / "ca.key").read_bytes(), password=None)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(common_name)]), critical=False)
        .sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
    )
    into.mkdir(parents=True, exist_ok=True)
    pem, key_path = into / f"{common_name}.pem", into / f"{common_name}.key"
    pem.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return pem, key_path


class SecureCluster:
    def __init__(
        self,
        root: Path,
        zookeeper: LocalZooKeeper,
        broker_ids: tuple[int, ...],
        acl_extra: str = "",
    ) -> None:
        self.root = root
        # A chroot at the top: a parent one cluster made would be locked with its credential,
        # which the next cluster sharing the ZooKeeper does not have.
        self.connect = f"{zookeeper.connect_string}/twinlog-{uuid.uuid4().hex[:12]}"
        self.pki = root / "certs"
        self.client_pki = make_pki(root / "client-pki")
        certificates = make_broker_certificates(self.pki, list(broker_ids), days=1)
        self.tokens_file = root / "tokens"
        self.tokens_file.write_text("".join(f"{token} {name}\n" for name, token in TOKENS.items()))
        self.acl_file = root / "acl"
        self.acl_file.write_text(ACL + acl_extra)
        self.zookeeper_auth_file = root / "zookeeper.auth"
        self.credential: ZooKeeperCredential = ensure_zookeeper_credential_file(
            self.zookeeper_auth_file
        )
        self.brokers: dict[int, ServerProcess] = {}
        for broker_id in broker_ids:
            arguments = [
                "--broker-id", str(broker_id),
                "--zookeeper", self.connect,
                "--zookeeper-session-timeout-ms", str(SESSION_TIMEOUT_MS),
                "--zookeeper-auth-file", str(self.zookeeper_auth_file),
                "--tls-cert", str(self.client_pki / "server.pem"),
                "--tls-key", str(self.client_pki / "server.key"),
                "--tokens-file", str(self.tokens_file),
                "--acl-file", str(self.acl_file),
                "--kafka-listener", "127.0.0.1:0",  # SASL_SSL: the client port's TLS, tokens
                *certificates[broker_id].serve_arguments(),
            ]  # fmt: skip
            for setting in BROKER_SETTINGS:
                arguments += ["--config", setting]
            self.brokers[broker_id] = ServerProcess(root / f"b{broker_id}", *arguments)
        self.session: ZooKeeperSession | None = None

    def start(self) -> SecureCluster:
        # Side by side (each imports for a second or two); each waited for once all run.
        for process in self.brokers.values():
            process.spawn()
        for process in self.brokers.values():
            process.wait_serving()
        self.session = ZooKeeperSession(
            self.connect, session_timeout_ms=SESSION_TIMEOUT_MS, credential=self.credential
        )
        return self

    @property
    def bootstrap(self) -> str:
        return ",".join(process.address for _, process in sorted(self.brokers.items()))

    def options(self, principal: str, request_timeout_ms: int = 20_000) -> ConnectionOptions:
        return ConnectionOptions(
            token=TOKENS[principal],
            tls_ca_file=str(self.client_pki / "ca.pem"),
            request_timeout_ms=request_timeout_ms,
        )

    def inter_broker_address(self, broker_id: int) -> str:
        assert self.session is not None
        return live_brokers(self.session)[broker_id].inter_broker_address

    def kafka_bootstrap(self) -> list[str]:
        assert self.session is not None
        found = live_brokers(self.session).values()
        return [f"{info.kafka_host}:{info.kafka_port}" for info in found if info.kafka_port]

    def kafka_python(self, principal: str) -> dict[str, object]:
        """kafka-python's settings for ``principal`` over SASL_SSL."""
        return {
            "bootstrap_servers": self.kafka_bootstrap(),
            "security_protocol": "SASL_SSL",
            "ssl_cafile": str(self.client_pki / "ca.pem"),
            "sasl_mechanism": "PLAIN",
            "sasl_plain_username": principal,
            "sasl_plain_password": TOKENS[principal],
        }

    def broker_epoch(self, broker_id: int) -> int:
        assert self.session is not None
        return live_brokers(self.session)[broker_id].broker_epoch

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        assert self.session is not None
        return read_partition_state(self.session, topic, partition)

    def internal_channel(
        self, broker_id: int, certificate: tuple[Path, Path] | None, ca: Path | None = None
    ) -> grpc.Channel:
        """A TLS channel to broker ``broker_id``'s inter-broker listener presenting
        ``certificate`` (None: none), trusting ``ca`` (default: the cluster CA)."""
        root = (ca or self.pki / "ca.pem").read_bytes()
        key = certificate[1].read_bytes() if certificate else None
        chain = certificate[0].read_bytes() if certificate else None
        credentials = grpc.ssl_channel_credentials(root, key, chain)
        return grpc.secure_channel(
            self.inter_broker_address(broker_id),
            credentials,
            options=[("grpc.ssl_target_name_override", f"twinlog-broker-{broker_id}")],
        )

    def broker_certificate(self, broker_id: int) -> tuple[Path, Path]:
        return self.pki / f"broker-{broker_id}.pem", self.pki / f"broker-{broker_id}.key"

    def fingerprint(self) -> dict[str, str]:
        """A hash of every file under each data directory and of every znode's data under
        the cluster's chroot (ephemeral registrations included). LMDB's ``lock.mdb`` is
        left out: it is its readers' table, which every read changes, not data."""
        assert self.session is not None
        found: dict[str, str] = {}
        for broker_id, process in sorted(self.brokers.items()):
            for path in sorted(process.data_dir.rglob("*")):
                if path.is_file() and path.name != "lock.mdb":
                    found[f"b{broker_id}/{path.relative_to(process.data_dir)}"] = hashlib.sha256(
                        path.read_bytes()
                    ).hexdigest()
        client = self.session.client
        stack = ["/"]
        while stack:
            path = stack.pop()
            data, _ = client.get(path)
            found[f"zk:{path}"] = hashlib.sha256(data or b"").hexdigest()
            stack.extend(
                f"{path.rstrip('/')}/{child}" for child in sorted(client.get_children(path))
            )
        return found

    def settled_fingerprint(self, still_s: float = 2.0, timeout_s: float = 30.0) -> dict[str, str]:
        """The fingerprint once it has stayed the same for ``still_s`` (a cluster that just
        started or committed still writes its journals and checkpoints)."""
        deadline = time.monotonic() + timeout_s
        last = self.fingerprint()
        while True:
            time.sleep(still_s)
            now = self.fingerprint()
            if now == last:
                return now
            if time.monotonic() > deadline:
                changed = sorted(
                    key for key in now.keys() | last.keys() if now.get(key) != last.get(key)
                )
                raise AssertionError(f"the idle cluster kept changing: {changed[:10]}")
            last = now

    def logs(self) -> str:
        return "\n".join(
            f"--- broker {broker_id} ---\n{process.log()[-6000:]}"
            for broker_id, process in sorted(self.brokers.items())
        )

    def close(self) -> None:
        for process in self.brokers.values():
            process.kill()
        if self.session is not None:
            self.session.close()


@contextmanager
def running_secure_cluster(
    root: Path,
    zookeeper: LocalZooKeeper,
    broker_ids: tuple[int, ...] = (1, 2, 3),
    acl_extra: str = "",
) -> Iterator[SecureCluster]:
    """``acl_extra``: ACL file lines added to ``ACL``."""
    cluster = SecureCluster(root, zookeeper, broker_ids, acl_extra)
    try:
        yield cluster.start()
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.close()
