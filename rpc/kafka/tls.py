"""TLS on the Kafka listener: the gRPC server's certificate and key (``--tls-cert``,
``--tls-key``) and, with ``--tls-client-ca``, client certificates (mutual TLS).

Kafka calls such a listener SSL (SASL_SSL when clients then authenticate with SASL).
TLS 1.2 is the oldest version served. The handshake runs on the connection's own thread,
never on the accept loop's, so a client that connects and says nothing, or garbage,
holds only its own thread, and only for ``tls_handshake_ms``: Python's ssl counts a
socket's timeout over the whole handshake, not per read, so a client trickling bytes
cannot stretch it either.
"""

from __future__ import annotations

import socket
import ssl
import time
from collections.abc import Callable
from typing import cast

from twinlog.engine.base.errors import InvalidConfigError

# A TLS connection opens with a handshake record (ContentType 22); a plaintext Kafka
# request opens with its frame's size, whose first byte is 0 below 16 MiB.
TLS_HANDSHAKE_RECORD = 0x16
KAFKA_FRAME_FIRST_BYTE = 0x00
RelativeNames = tuple[tuple[tuple[str, str], ...], ...]


class TlsHandshakeError(Exception):
    """The connection did not become TLS; the message says why (logged, then it is closed)."""


def server_tls_context(
    cert_file: str, key_file: str, client_ca_file: str | None = None
) -> ssl.SSLContext:
    """The listener's TLS settings; InvalidConfigError names a file it cannot use."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert_file, key_file)
    except ssl.SSLError as error:  # OpenSSL's reasons for these are terse ("PEM lib")
        raise InvalidConfigError(
            f"Kafka listener TLS: {cert_file} and {key_file} are not a PEM certificate and "
            f"its private key ({_reason(error)})"
        ) from None
    except OSError as error:
        raise InvalidConfigError(
            f"Kafka listener TLS: cannot read {error.filename or f'{cert_file} or {key_file}'}: "
            f"{_reason(error)}"
        ) from None
    if client_ca_file:
        context.verify_mode = ssl.CERT_REQUIRED
        try:
            context.load_verify_locations(cafile=client_ca_file)
        except OSError as error:
            raise InvalidConfigError(
                f"Kafka listener TLS: cannot use client CA file {client_ca_file}: {_reason(error)}"
            ) from None
    return context


def secure(
    connection: socket.socket,
    context: ssl.SSLContext,
    timeout_s: float,
    adopt: Callable[[ssl.SSLSocket], bool],
) -> ssl.SSLSocket | None:
    """The connection after the server side of the TLS handshake, within ``timeout_s``.

    ``adopt`` is given the TLS socket before the handshake starts (the listener's stop
    must be able to shut that socket down, not the plain one it replaces, which is no
    longer usable); it returns False when the listener is stopping. None: the client left
    before saying anything, or the listener is stopping (nothing worth logging).
    Raises TlsHandshakeError with the reason otherwise."""
    deadline = time.monotonic() + timeout_s
    connection.settimeout(timeout_s)
    try:
        first = connection.recv(1, socket.MSG_PEEK)
    except TimeoutError:
        raise TlsHandshakeError(_silent(timeout_s)) from None
    except OSError:
        return None
    if not first:
        return None
    if first[0] != TLS_HANDSHAKE_RECORD:
        raise TlsHandshakeError(_not_tls(first[0]))
    tls = context.wrap_socket(connection, server_side=True, do_handshake_on_connect=False)
    if not adopt(tls):
        tls.close()
        return None
    tls.settimeout(max(0.001, deadline - time.monotonic()))
    try:
        tls.do_handshake()
    except ssl.SSLError as error:
        raise TlsHandshakeError(f"TLS handshake failed: {_reason(error)}") from None
    except TimeoutError:
        raise TlsHandshakeError(_silent(timeout_s)) from None
    except OSError as error:
        raise TlsHandshakeError(f"TLS handshake failed: {_reason(error)}") from None
    return tls


def peer_common_name(connection: ssl.SSLSocket) -> str | None:
    """The common name of the client's verified certificate (mutual TLS), if it has one."""
    certificate = connection.getpeercert() or {}
    # Relative distinguished names, each a tuple of (key, value) pairs (typeshed types the
    # lookup as the union of every field's shape).
    subject = cast(RelativeNames, certificate.get("subject", ()))
    for attributes in subject:
        for key, value in attributes:
            if key == "commonName":
                return value
    return None


def _silent(timeout_s: float) -> str:
    return f"no TLS handshake within {timeout_s * 1000:.0f} ms (tls_handshake_ms)"


def _not_tls(first_byte: int) -> str:
    if first_byte == KAFKA_FRAME_FIRST_BYTE:
        return (
            "it sent a plaintext Kafka request to this TLS listener; the client needs "
            "security.protocol SSL (SASL_SSL with SASL) and the CA of the server's certificate"
        )
    return f"it sent byte 0x{first_byte:02x} where a TLS handshake starts (0x16): not TLS"


def _reason(error: OSError) -> str:
    """Why OpenSSL (or the OS) refused, as it says it."""
    if isinstance(error, ssl.SSLCertVerificationError):
        return str(error.verify_message)
    return error.strerror or str(error)
