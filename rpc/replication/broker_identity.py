"""Who a broker is to another broker: mutual TLS with the cluster's certificate authority.

Kafka answers "which caller is a broker?" with a separate inter-broker listener and a
ClusterAction permission only brokers hold. twinlog does the same with certificates:

    the cluster CA        signs one certificate per broker (``twinlog cluster certs``)
    broker N's cert       CN=twinlog-broker-N and subjectAltName DNS:twinlog-broker-N
    the listener          ``--inter-broker-listener HOST:PORT``: Replication and
                          Coordination only, and only to a client certificate the CA
                          signed whose name is a broker's (``caller_broker_id``)
    a call out            presents this broker's certificate and checks the other's
                          name against the broker it meant to reach (a channel to broker
                          N verifies ``twinlog-broker-N``, whatever address ZooKeeper gave)

A client's bearer token or a client certificate (CN=alice) is no broker's: both are
refused on the inter-broker listener, and its internal services are not served on the
client port at all.

``BrokerTls.load`` checks the files at start-up (readable, a certificate for this
broker's id, signed by the CA, with its key), so a mistake is one line before recovery,
not a failed handshake later.

Thread rule: immutable values; any thread.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from twinlog.engine.base.errors import ClusterAuthorizationError, InvalidConfigError

BROKER_NAME_PREFIX = "twinlog-broker-"
_BROKER_NAME = re.compile(r"twinlog-broker-(\d+)")
# gRPC's Python API hands the peer's certificate fields over under these keys.
COMMON_NAME_KEY = "x509_common_name"
TRANSPORT_SECURITY_KEY = "transport_security_type"


def broker_name(broker_id: int) -> str:
    """The name broker ``broker_id``'s certificate carries (CN and DNS subjectAltName)."""
    return f"{BROKER_NAME_PREFIX}{broker_id}"


def broker_id_of_name(name: str) -> int | None:
    """``twinlog-broker-N`` -> N; any other name is no broker's."""
    found = _BROKER_NAME.fullmatch(name)
    return int(found.group(1)) if found else None


def _read(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise InvalidConfigError(
            f"cannot read the inter-broker {what} {path}: {error.strerror}"
        ) from None


@dataclass(frozen=True)
class BrokerTls:
    """This broker's certificate and key, and the cluster CA that signs every broker's."""

    broker_id: int
    certificate: bytes
    key: bytes
    ca: bytes

    @classmethod
    def load(cls, broker_id: int, certificate_file: str, key_file: str, ca_file: str) -> BrokerTls:
        """Read and check the three PEM files; InvalidConfigError says which is wrong."""
        tls = cls(
            broker_id,
            _read(certificate_file, "certificate"),
            _read(key_file, "key"),
            _read(ca_file, "CA certificate"),
        )
        check_broker_certificate(tls, certificate_file, key_file, ca_file)
        return tls

    def server_credentials(self) -> grpc.ServerCredentials:
        """The inter-broker listener's: only a client certificate the CA signed gets in."""
        return grpc.ssl_server_credentials(
            [(self.key, self.certificate)], root_certificates=self.ca, require_client_auth=True
        )

    def channel_credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(
            root_certificates=self.ca, private_key=self.key, certificate_chain=self.certificate
        )

    def channel_options(self, broker_id: int) -> tuple[tuple[str, Any], ...]:
        """A channel to broker ``broker_id`` accepts only that broker's certificate."""
        return (("grpc.ssl_target_name_override", broker_name(broker_id)),)


def check_broker_certificate(
    tls: BrokerTls, certificate_file: str, key_file: str, ca_file: str
) -> None:
    """The certificate names this broker, the CA signed it, and the key is its key."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.x509.oid import NameOID

    try:
        certificate = x509.load_pem_x509_certificate(tls.certificate)
    except ValueError:
        raise InvalidConfigError(
            f"the inter-broker certificate {certificate_file} is not a PEM certificate"
        ) from None
    try:
        ca = x509.load_pem_x509_certificate(tls.ca)
    except ValueError:
        raise InvalidConfigError(
            f"the inter-broker CA certificate {ca_file} is not a PEM certificate"
        ) from None
    try:
        key = serialization.load_pem_private_key(tls.key, password=None)
    except (ValueError, TypeError):
        raise InvalidConfigError(
            f"the inter-broker key {key_file} is not an unencrypted PEM private key"
        ) from None
    names = [
        str(item.value) for item in certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    ]
    wanted = broker_name(tls.broker_id)
    if names != [wanted]:
        raise InvalidConfigError(
            f"the inter-broker certificate {certificate_file} names {names or 'nobody'}, "
            f"broker {tls.broker_id}'s must name {wanted!r} (CN and DNS subjectAltName); "
            "make it with 'twinlog cluster certs' or see 'Securing a cluster' in "
            "docs/operations.md"
        )
    try:
        certificate.verify_directly_issued_by(ca)
    except (ValueError, TypeError, Exception) as error:  # InvalidSignature has no base here
        raise InvalidConfigError(
            f"the inter-broker certificate {certificate_file} was not signed by the CA in "
            f"{ca_file} ({type(error).__name__}): every broker's certificate must come from "
            "the cluster's one CA"
        ) from None
    public = certificate.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    if (
        key.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        != public
    ):
        raise InvalidConfigError(
            f"the inter-broker key {key_file} is not the key of {certificate_file}"
        )


def caller_broker_id(context: grpc.ServicerContext) -> int:
    """The broker id the caller's certificate proves (the CA signed it: gRPC checked that
    before the call got here); ClusterAuthorizationError for any other caller."""
    auth = context.auth_context()
    names = [
        value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
        for value in auth.get(COMMON_NAME_KEY, [])
    ]
    found = [broker_id_of_name(name) for name in names]
    if len(found) != 1 or found[0] is None:
        raise ClusterAuthorizationError(
            f"the caller ({names[0] if names else 'no client certificate'}) is not a broker of "
            "this cluster: the inter-broker services answer only a certificate "
            "CN=twinlog-broker-N signed by the cluster CA; clients use the client port"
        )
    return found[0]
