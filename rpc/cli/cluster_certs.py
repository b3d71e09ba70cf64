"""``twinlog cluster certs``: a throwaway certificate authority and one certificate per broker.

    twinlog cluster certs --out ./dev-cluster/certs --brokers 1,2,3

writes, with keys readable by this user only::

    ca.pem  ca.key                        the cluster CA (keep ca.key off the brokers)
    broker-1.pem  broker-1.key  ...       CN and DNS subjectAltName twinlog-broker-N

which ``twinlog serve --inter-broker-tls-cert broker-N.pem --inter-broker-tls-key
broker-N.key --inter-broker-tls-ca ca.pem`` takes (``rpc/replication/broker_identity``).
An existing CA in the folder is reused, so brokers added later join the same cluster;
an existing broker certificate is kept. For development and tests: a production cluster's
CA is the operator's (docs/operations.md, "Securing a cluster").

Made with ``cryptography`` (the well-kept library for X.509 in Python): EC P-256 keys,
valid for ``days`` (365 by default).
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from twinlog.engine.base.errors import InvalidConfigError
from twinlog.rpc.replication.broker_identity import broker_name

CA_NAME = "twinlog cluster CA"
DAYS = 365


@dataclass(frozen=True)
class BrokerCertFiles:
    certificate: Path
    key: Path
    ca: Path

    def serve_arguments(self) -> list[str]:
        """The ``twinlog serve`` flags that use them."""
        return [
            "--inter-broker-tls-cert",
            str(self.certificate),
            "--inter-broker-tls-key",
            str(self.key),
            "--inter-broker-tls-ca",
            str(self.ca),
        ]


def _write_private(path: Path, data: bytes) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(descriptor, 0o600)  # the mode above applies only to a file it creates
    with os.fdopen(descriptor, "wb") as file:
        file.write(data)


def _name(common_name: str) -> Any:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _new_key() -> Any:
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    pem: bytes = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return pem


def _certificate_authority(directory: Path, days: int) -> tuple[Any, Any]:
    """The folder's CA (made if missing): its certificate and key."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization

    certificate_path, key_path = directory / "ca.pem", directory / "ca.key"
    if certificate_path.exists() != key_path.exists():
        # A CA without its key (kept off this machine, as it should be) cannot sign, and a
        # new one would leave every existing broker certificate unverifiable.
        raise InvalidConfigError(
            f"{directory} holds {'ca.pem' if certificate_path.exists() else 'ca.key'} "
            f"without {'ca.key' if certificate_path.exists() else 'ca.pem'}: put the cluster "
            "CA's key back beside its certificate to sign new brokers, or use an empty "
            "folder for a new cluster"
        )
    if certificate_path.exists():
        certificate = x509.load_pem_x509_certificate(certificate_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
        return certificate, key
    key = _new_key()
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(_name(CA_NAME))
        .issuer_name(_name(CA_NAME))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    _write_private(key_path, _key_pem(key))
    certificate_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    return certificate, key


def make_broker_certificates(
    directory: Path, broker_ids: list[int], days: int = DAYS
) -> dict[int, BrokerCertFiles]:
    """The CA and a certificate for each broker in ``directory`` (made where missing)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.x509.oid import ExtendedKeyUsageOID

    directory.mkdir(parents=True, exist_ok=True)
    ca_certificate, ca_key = _certificate_authority(directory, days)
    made = {}
    for broker_id in broker_ids:
        name = broker_name(broker_id)
        certificate_path = directory / f"broker-{broker_id}.pem"
        key_path = directory / f"broker-{broker_id}.key"
        if certificate_path.exists() and key_path.exists():
            kept = x509.load_pem_x509_certificate(certificate_path.read_bytes())
            try:
                kept.verify_directly_issued_by(ca_certificate)
                signed = True
            except Exception:  # a wrong signature, or another kind of key: not this CA's
                signed = False
            if not signed:
                raise InvalidConfigError(
                    f"{certificate_path} was not issued by the CA in {directory / 'ca.pem'}: "
                    "remove it (and its key) to make a new one"
                )
        else:
            key = _new_key()
            now = datetime.datetime.now(datetime.UTC)
            certificate = (
                x509.CertificateBuilder()
                .subject_name(_name(name))
                .issuer_name(ca_certificate.subject)
                .public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(days=days))
                .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                # a broker is both: it serves other brokers and calls them
                .add_extension(
                    x509.ExtendedKeyUsage(
                        [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                    ),
                    critical=False,
                )
                .sign(ca_key, hashes.SHA256())
            )
            _write_private(key_path, _key_pem(key))
            certificate_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        made[broker_id] = BrokerCertFiles(certificate_path, key_path, directory / "ca.pem")
    return made
