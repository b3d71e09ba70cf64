"""Who gets through the inter-broker door: an ``InterBrokerServer`` on a free loopback port
holding broker 3's certificate (``twinlog cluster certs``' CA), called over real gRPC by
brokers, by a client certificate of the same CA (CN=alice), by another CA's broker
certificate, and by no certificate at all; and ``BrokerTls.load``'s start-up refusals."""

from __future__ import annotations

import datetime
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from twinlog.engine.base.errors import (
    ClusterAuthorizationError,
    InvalidConfigError,
    TwinlogError,
)
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.replication.fetch_calls import FetchedPartition, ReplicaFetch
from twinlog.engine.transactions.partition_calls import IssuedProducer, LookupProducer
from twinlog.rpc.cli.cluster_certs import BrokerCertFiles, make_broker_certificates
from twinlog.rpc.generated.twinlog.v1 import (
    coordination_pb2,
    coordination_pb2_grpc,
    replication_pb2_grpc,
)
from twinlog.rpc.policy.audit import AUDIT_LOGGER
from twinlog.rpc.replication.broker_identity import BrokerTls, broker_id_of_name, broker_name
from twinlog.rpc.replication.channel import CHANNEL_OPTIONS, open_channel
from twinlog.rpc.replication.convert import fetch_to_proto
from twinlog.rpc.replication.coordination_locator import Location
from twinlog.rpc.replication.internal_checks import InternalCallChecks, RegisteredEpochs
from twinlog.rpc.replication.internal_guard import InternalGuard
from twinlog.rpc.server.inter_broker import InterBrokerDoor, InterBrokerServer, audit_refusal
from twinlog.rpc.wire.errors import error_from_rpc_error

SERVER_BROKER = 3
TIMEOUT_S = 5.0
EPOCHS = {1: 101, 2: 102, 3: 103}


# --- certificates ------------------------------------------------------------------------


@dataclass(frozen=True)
class Pki:
    cluster: dict[int, BrokerCertFiles]  # brokers 1, 2, 3 of the cluster CA
    stranger: BrokerCertFiles  # broker 1's name, signed by another CA
    alice: BrokerCertFiles  # CN=alice, signed by the cluster CA (a client's certificate)


def make_client_certificate(directory: Path, common_name: str) -> BrokerCertFiles:
    """A client certificate (clientAuth) for ``common_name``, signed by the folder's CA."""
    ca_pem = directory / "ca.pem"
    ca = x509.load_pem_x509_certificate(ca_pem.read_bytes())
    ca_key = serialization.load_pem_private_key((directory / "ca.key").read_bytes(), None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    certificate_path = directory / f"{common_name}.pem"
    key_path = directory / f"{common_name}.key"
    certificate_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return BrokerCertFiles(certificate_path, key_path, ca_pem)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    cluster_dir = tmp_path_factory.mktemp("cluster-certs")
    cluster = make_broker_certificates(cluster_dir, [1, 2, 3])
    stranger = make_broker_certificates(tmp_path_factory.mktemp("other-ca"), [1])[1]
    return Pki(cluster, stranger, make_client_certificate(cluster_dir, "alice"))


def loaded(broker_id: int, files: BrokerCertFiles) -> BrokerTls:
    return BrokerTls.load(broker_id, str(files.certificate), str(files.key), str(files.ca))


def unchecked(files: BrokerCertFiles) -> BrokerTls:
    """A caller's files as they are (a stranger's would not pass ``BrokerTls.load``)."""
    return BrokerTls(
        -1, files.certificate.read_bytes(), files.key.read_bytes(), files.ca.read_bytes()
    )


# --- the server --------------------------------------------------------------------------


@dataclass
class FakeBroker:
    """Answers every admitted call; remembers what reached it."""

    fetches: list[ReplicaFetch] = field(default_factory=list)
    lookups: list[LookupProducer] = field(default_factory=list)

    def replica_fetch(self, request: ReplicaFetch) -> list[FetchedPartition]:
        self.fetches.append(request)
        return []

    def lookup_producer_here(self, request: LookupProducer) -> IssuedProducer:
        self.lookups.append(request)
        return IssuedProducer("loader", None)


class NoLeaders:
    def partition_leader(
        self, topic_partition: TopicPartition, refresh: bool = False
    ) -> Location | None:
        return None

    def coordinator(self, coordinator_partition: int, refresh: bool = False) -> int | None:
        return None


@dataclass
class Door:
    server: InterBrokerServer
    broker: FakeBroker

    @property
    def address(self) -> str:
        return self.server.address


@pytest.fixture()
def door(pki: Pki) -> Iterator[Door]:
    broker = FakeBroker()
    checks = InternalCallChecks(
        NoLeaders(),
        RegisteredEpochs(lambda: dict(EPOCHS)),
        lambda group: TopicPartition("__consumer_offsets", 0),
    )
    guard = InternalGuard(checks, brokers_authenticate=True, on_refused=audit_refusal)
    server = InterBrokerServer(
        broker,
        InterBrokerDoor(guard, loaded(SERVER_BROKER, pki.cluster[SERVER_BROKER]), ("127.0.0.1", 0)),
        options=[],
        response_bytes_max=1 << 20,
        worker_threads=16,
    )
    server.start()
    try:
        yield Door(server, broker)
    finally:
        server.stop(0)


def lookup(channel: grpc.Channel) -> coordination_pb2.LookupProducerResponse:
    stub = coordination_pb2_grpc.CoordinationStub(channel)
    request = coordination_pb2.LookupProducerRequest(producer_id=7, producer_generation=1)
    answer: coordination_pb2.LookupProducerResponse = stub.LookupProducer(
        request, timeout=TIMEOUT_S
    )
    return answer


def refused(call: object) -> grpc.RpcError:
    assert callable(call)
    with pytest.raises(grpc.RpcError) as raised:
        call()
    error = raised.value
    assert isinstance(error, grpc.RpcError)
    return error


def audit_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == AUDIT_LOGGER and record.getMessage().startswith("internal.refused")
    ]


# --- who gets in -------------------------------------------------------------------------


def test_a_broker_of_the_cluster_is_admitted(pki: Pki, door: Door) -> None:
    with open_channel(door.address, CHANNEL_OPTIONS, loaded(1, pki.cluster[1]), 3) as channel:
        answer = lookup(channel)
    assert answer.known and answer.transactional_id == "loader"
    assert door.broker.lookups == [LookupProducer(7, 1)]


def test_a_broker_fetches_in_its_own_name_only(
    pki: Pki, door: Door, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    with open_channel(door.address, CHANNEL_OPTIONS, loaded(2, pki.cluster[2]), 3) as channel:
        stub = replication_pb2_grpc.ReplicationStub(channel)
        stub.Fetch(fetch_to_proto(ReplicaFetch(2, EPOCHS[2], ())), timeout=TIMEOUT_S)
        error = refused(
            lambda: stub.Fetch(fetch_to_proto(ReplicaFetch(1, EPOCHS[1], ())), timeout=TIMEOUT_S)
        )
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    assert isinstance(error_from_rpc_error(error), ClusterAuthorizationError)
    assert door.broker.fetches == [ReplicaFetch(2, EPOCHS[2], ())]  # the forged one never arrived
    [line] = audit_lines(caplog)
    assert "method=replication.fetch" in line and "broker=2" in line
    assert "error=ClusterAuthorizationError" in line


def test_a_client_certificate_of_the_cluster_ca_is_refused_and_audited(
    pki: Pki, door: Door, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    with open_channel(door.address, CHANNEL_OPTIONS, unchecked(pki.alice), 3) as channel:
        error = refused(lambda: lookup(channel))
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    rebuilt = error_from_rpc_error(error)
    assert isinstance(rebuilt, ClusterAuthorizationError), rebuilt
    assert "alice" in str(rebuilt)
    assert door.broker.lookups == []
    [line] = audit_lines(caplog)
    assert "method=coordination.lookup_producer" in line
    assert "broker=none" in line and "peer=ipv4:127.0.0.1:" in line
    assert "error=ClusterAuthorizationError" in line and "alice" in line


def test_a_caller_without_a_client_certificate_fails_the_handshake(
    pki: Pki, door: Door, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    credentials = grpc.ssl_channel_credentials(root_certificates=pki.cluster[1].ca.read_bytes())
    options = [("grpc.ssl_target_name_override", broker_name(SERVER_BROKER))]
    with grpc.secure_channel(door.address, credentials, options=options) as channel:
        error = refused(lambda: lookup(channel))
    assert error.code() == grpc.StatusCode.UNAVAILABLE, error
    assert door.broker.lookups == []
    assert audit_lines(caplog) == []  # refused by TLS: no call was made


def test_a_broker_certificate_of_another_ca_fails_the_handshake(pki: Pki, door: Door) -> None:
    # Trusting the cluster CA, so only the server's refusal of the certificate is tested.
    stranger = BrokerTls(
        1,
        pki.stranger.certificate.read_bytes(),
        pki.stranger.key.read_bytes(),
        pki.cluster[1].ca.read_bytes(),
    )
    with open_channel(door.address, CHANNEL_OPTIONS, stranger, 3) as channel:
        error = refused(lambda: lookup(channel))
    assert error.code() == grpc.StatusCode.UNAVAILABLE, error
    assert door.broker.lookups == []


def test_a_channel_meant_for_broker_2_refuses_broker_3s_certificate(pki: Pki, door: Door) -> None:
    tls = loaded(1, pki.cluster[1])
    with open_channel(door.address, CHANNEL_OPTIONS, tls, broker_id=2) as channel:
        error = refused(lambda: lookup(channel))
    assert error.code() == grpc.StatusCode.UNAVAILABLE, error
    assert door.broker.lookups == []
    with open_channel(door.address, CHANNEL_OPTIONS, tls, broker_id=3) as channel:
        lookup(channel)  # the same files reach broker 3 under its own name
    assert len(door.broker.lookups) == 1


def test_only_broker_names_are_broker_names() -> None:
    assert broker_name(12) == "twinlog-broker-12"
    assert broker_id_of_name("twinlog-broker-12") == 12
    for name in ("alice", "twinlog-broker-", "twinlog-broker-1x", "xtwinlog-broker-1", ""):
        assert broker_id_of_name(name) is None, name


# --- BrokerTls.load: refused at start-up, one clear line ---------------------------------


def refusal(broker_id: int, certificate: Path, key: Path, ca: Path) -> str:
    with pytest.raises(InvalidConfigError) as raised:
        BrokerTls.load(broker_id, str(certificate), str(key), str(ca))
    message = str(raised.value)
    assert "\n" not in message
    return message


def test_load_accepts_a_brokers_own_files(pki: Pki) -> None:
    tls = loaded(2, pki.cluster[2])
    assert tls.broker_id == 2
    assert tls.channel_options(3) == (("grpc.ssl_target_name_override", "twinlog-broker-3"),)


def test_load_refuses_another_brokers_certificate(pki: Pki) -> None:
    files = pki.cluster[2]
    message = refusal(1, files.certificate, files.key, files.ca)
    assert str(files.certificate) in message
    assert "twinlog-broker-2" in message and "'twinlog-broker-1'" in message


def test_load_refuses_a_client_certificate(pki: Pki) -> None:
    message = refusal(1, pki.alice.certificate, pki.alice.key, pki.alice.ca)
    assert "alice" in message and "twinlog cluster certs" in message


def test_load_refuses_a_certificate_another_ca_signed(pki: Pki) -> None:
    ca = pki.cluster[1].ca
    message = refusal(1, pki.stranger.certificate, pki.stranger.key, ca)
    assert "not signed by the CA" in message and str(ca) in message


def test_load_refuses_a_key_that_is_not_the_certificates(pki: Pki) -> None:
    files = pki.cluster[1]
    message = refusal(1, files.certificate, pki.cluster[2].key, files.ca)
    assert f"{pki.cluster[2].key} is not the key of {files.certificate}" in message


@pytest.mark.parametrize("which", ["certificate", "key", "CA certificate"])
def test_load_refuses_a_missing_file_naming_it(pki: Pki, tmp_path: Path, which: str) -> None:
    files = pki.cluster[1]
    missing = tmp_path / "missing.pem"
    paths = {"certificate": files.certificate, "key": files.key, "CA certificate": files.ca}
    paths[which] = missing
    message = refusal(1, paths["certificate"], paths["key"], paths["CA certificate"])
    assert f"cannot read the inter-broker {which} {missing}" in message


@pytest.mark.parametrize("which", ["certificate", "key", "CA certificate"])
def test_load_refuses_a_file_that_is_not_pem(pki: Pki, tmp_path: Path, which: str) -> None:
    files = pki.cluster[1]
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a PEM file\n")
    paths = {"certificate": files.certificate, "key": files.key, "CA certificate": files.ca}
    paths[which] = garbage
    message = refusal(1, paths["certificate"], paths["key"], paths["CA certificate"])
    assert f"inter-broker {which} {garbage} is not" in message


def test_every_twinlog_error_reaches_the_audit(pki: Pki) -> None:
    """The guard reports each refusal, whatever the check raised (not only the name's)."""
    seen: list[tuple[str, int | None, str]] = []

    def report(method: str, peer: str, caller: int | None, error: TwinlogError) -> None:
        seen.append((method, caller, type(error).__name__))

    class Context:
        def auth_context(self) -> dict[str, list[bytes]]:
            return {"x509_common_name": [b"twinlog-broker-2"]}

        def peer(self) -> str:
            return "ipv4:127.0.0.1:1"

    def check(checks: InternalCallChecks, caller: int | None) -> None:
        raise ClusterAuthorizationError(f"no, {caller}")

    guard = InternalGuard(
        InternalCallChecks(NoLeaders(), RegisteredEpochs(dict), lambda g: TopicPartition(g, 0)),
        brokers_authenticate=True,
        on_refused=report,
    )
    context = Context()
    assert guard.admit(context, "m.ok") == 2
    with pytest.raises(ClusterAuthorizationError, match="no, 2"):
        guard.admit(context, "m.refused", check)
    assert seen == [("m.refused", 2, "ClusterAuthorizationError")]
