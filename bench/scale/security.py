"""How ``bench.scale`` secures its servers (``--security``), and what the producers present.

    off      no tokens, no ACLs, no TLS: the servers as ``bench.cluster`` starts them
    tokens   the default, as docs/operations.md "Securing a cluster" sets a cluster up
             (steps 1 to 3): bearer tokens (``--tokens-file``) and ACLs (``--acl-file``)
             on the client port; on the cluster also each broker's certificate from a
             cluster CA (``twinlog cluster certs``: replication and coordination on a
             mutual-TLS inter-broker listener, which a cluster broker with tokens
             refuses to start without) and a ZooKeeper digest credential
             (``--zookeeper-auth-file``: every znode locked to the brokers)
    tls      the same, and TLS on the client port (step 6: ``--tls-cert``/``--tls-key``),
             with a server certificate for 127.0.0.1 from a CA of its own that the
             producers verify; the tokens still authenticate (no client certificates)

Two principals (``ACL``): ``app``, whose token every producer process presents (read
from a file, as ``twinlog produce --token-file`` does), may write the topic and use the
transactional ids ``bench-scale-*``, nothing else; ``ops``, the benchmark's own admin
client, creates the topic, probes the coordinators and lists the transactions in
flight. Everything is made fresh in the run's directory, keys and tokens mode 600.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from bench.scale.settings import TOPIC
from bench.scale.transactional_ids import PREFIX
from twinlog.engine.zookeeper.credentials import (
    ZooKeeperCredential,
    ensure_zookeeper_credential_file,
)
from twinlog.rpc.cli.cluster_certs import BrokerCertFiles, make_broker_certificates
from twinlog.rpc.client.connection_options import ConnectionOptions

OFF = "off"
TOKENS = "tokens"
TLS = "tls"
MODES = (OFF, TOKENS, TLS)  # from the least to the most secured
DESCRIPTIONS = {
    OFF: "no tokens, no ACLs, no TLS",
    TOKENS: "bearer tokens and ACLs on the client port, no TLS there; the cluster also "
    "mutual TLS between brokers and a ZooKeeper credential",
    TLS: "TLS, bearer tokens and ACLs on the client port; the cluster also mutual TLS "
    "between brokers and a ZooKeeper credential",
}

APP = "app"
OPS = "ops"
ACL = f"""\
# principal  operation  pattern
{APP}        write      {TOPIC}
{APP}        write      transactional-id:{PREFIX}-*
{OPS}        create     {TOPIC}
{OPS}        describe   transactional-id:*
"""
CERTIFICATE_DAYS = 2  # the client port's certificate: a run's


def parse_modes(text: str) -> tuple[str, ...]:
    """``off,tls`` -> ("off", "tls"): known modes, each once, in the order given."""
    modes = tuple(word.strip() for word in text.split(","))
    unknown = [mode for mode in modes if mode not in MODES]
    if unknown or not modes:
        raise ValueError(f"{', '.join(unknown) or text!r}: the modes are {', '.join(MODES)}")
    if len(set(modes)) != len(modes):
        raise ValueError(f"{text!r} names a mode twice")
    return modes


def _write_private(path: Path, text: str | bytes) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(text.encode() if isinstance(text, str) else text)


@dataclass(frozen=True)
class ClientPortCertificate:
    ca: Path  # what the producers trust
    certificate: Path  # every server's (IP 127.0.0.1, DNS localhost)
    key: Path


def make_client_port_certificate(directory: Path) -> ClientPortCertificate:
    """A throwaway CA and a server certificate for 127.0.0.1 signed by it, in
    ``directory`` (EC P-256, as ``twinlog cluster certs`` makes; no command of the
    project makes a client port's certificate, which an operator gets from any CA the
    clients trust). Not the cluster CA: a certificate it signs gets through the TLS
    handshake of the inter-broker listeners (docs/operations.md)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    def name(common_name: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])

    def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
        return key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    valid_from = now - datetime.timedelta(minutes=5)
    valid_to = now + datetime.timedelta(days=CERTIFICATE_DAYS)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = name("bench.scale client port CA")
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(valid_from)
        .not_valid_after(valid_to)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    server_key = ec.generate_private_key(ec.SECP256R1())
    server = (
        x509.CertificateBuilder()
        .subject_name(name("localhost"))
        .issuer_name(ca_name)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(valid_from)
        .not_valid_after(valid_to)
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    files = ClientPortCertificate(
        directory / "ca.pem", directory / "server.pem", directory / "server.key"
    )
    files.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    files.certificate.write_bytes(server.public_bytes(serialization.Encoding.PEM))
    _write_private(files.key, key_pem(server_key))
    return files


@dataclass(frozen=True)
class Security:
    """One mode's files. ``off`` has none: every method then adds nothing."""

    mode: str
    tokens: dict[str, str]  # principal -> token
    tokens_file: Path | None = None
    acl_file: Path | None = None
    app_token_file: Path | None = None  # what every producer process reads its token from
    client_port: ClientPortCertificate | None = None  # tls only
    broker_certificates: dict[int, BrokerCertFiles] | None = None
    zookeeper_auth_file: Path | None = None
    zookeeper_credential: ZooKeeperCredential | None = None

    @classmethod
    def write(cls, mode: str, directory: Path, broker_ids: Iterable[int]) -> Security:
        """Fresh credentials for ``mode`` in ``directory`` (made): tokens, the ACL file;
        with ``broker_ids``, their certificates and the ZooKeeper credential (``()``:
        one node only); for ``tls`` the client port's certificate."""
        if mode not in MODES:
            raise ValueError(f"security mode {mode!r} is not one of {MODES}")
        if mode == OFF:
            return cls(mode, {})
        directory.mkdir(parents=True, exist_ok=True)
        tokens = {principal: secrets.token_hex(16) for principal in (APP, OPS)}
        tokens_file = directory / "tokens.txt"
        _write_private(tokens_file, "".join(f"{token} {name}\n" for name, token in tokens.items()))
        acl_file = directory / "acl.txt"
        acl_file.write_text(ACL)
        app_token_file = directory / f"{APP}.token"
        _write_private(app_token_file, tokens[APP] + "\n")
        ids = sorted(broker_ids)
        certificates = make_broker_certificates(directory / "certs", ids) if ids else None
        zookeeper_auth_file = directory / "zookeeper.auth" if ids else None
        credential = (
            ensure_zookeeper_credential_file(zookeeper_auth_file) if zookeeper_auth_file else None
        )
        client_port = (
            make_client_port_certificate(directory / "client-port") if mode == TLS else None
        )
        return cls(
            mode,
            tokens,
            tokens_file,
            acl_file,
            app_token_file,
            client_port,
            certificates,
            zookeeper_auth_file,
            credential,
        )

    def server_arguments(self) -> list[str]:
        """The ``twinlog serve`` flags of the client port: a one-node server's all."""
        arguments = []
        if self.tokens_file is not None and self.acl_file is not None:
            arguments += ["--tokens-file", str(self.tokens_file), "--acl-file", str(self.acl_file)]
        if self.client_port is not None:
            arguments += [
                "--tls-cert", str(self.client_port.certificate),
                "--tls-key", str(self.client_port.key),
            ]  # fmt: skip
        return arguments

    def broker_arguments(self, broker_id: int) -> list[str]:
        """A cluster broker's: the client port's, its certificates, the ZooKeeper credential."""
        arguments = self.server_arguments()
        if self.broker_certificates is not None:
            arguments += self.broker_certificates[broker_id].serve_arguments()
        if self.zookeeper_auth_file is not None:
            arguments += ["--zookeeper-auth-file", str(self.zookeeper_auth_file)]
        return arguments

    def options(self, request_timeout_ms: int) -> ConnectionOptions:
        """The benchmark's own admin client (``ops``)."""
        return ConnectionOptions(
            token=self.tokens.get(OPS),
            tls_ca_file=None if self.client_port is None else str(self.client_port.ca),
            request_timeout_ms=request_timeout_ms,
        )

    def producer_arguments(self) -> list[str]:
        """The ``bench.scale.producer`` flags: ``app``'s token file, the CA to trust."""
        arguments = []
        if self.app_token_file is not None:
            arguments += ["--token-file", str(self.app_token_file)]
        if self.client_port is not None:
            arguments += ["--tls-ca", str(self.client_port.ca)]
        return arguments
