"""Where a client's requests go: a server address, or an embedded broker.

``connect("127.0.0.1:7070", token=...)`` opens a gRPC channel (``RemoteBroker``);
``connect(broker)`` with an ``engine.Broker`` (or anything with its methods)
returns it as is: the same client code then runs in-process, without network.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from engine.errors import InvalidConfigError
from rpc.broker_api import BrokerApi

DEFAULT_SERVER = "127.0.0.1:7070"
TOKEN_ENVIRONMENT = "TWINLOG_TOKEN"


@dataclass(frozen=True)
class ConnectionOptions:
    """How to reach a server. Paths are PEM files; all optional."""

    token: str | None = None  # bearer token; default: $TWINLOG_TOKEN
    tls: bool = False  # TLS with the system's root certificates (or tls_ca_file)
    tls_ca_file: str | None = None  # CA that signed the server's certificate; implies tls
    tls_cert_file: str | None = None  # client certificate for mutual TLS; implies tls
    tls_key_file: str | None = None
    tls_server_name: str | None = None  # expected name in the server's certificate
    request_timeout_ms: int = 30_000  # deadline of one request (a long poll adds its wait)

    def __post_init__(self) -> None:
        # gRPC aborts the whole process (SIGABRT) on a key without its certificate or the
        # reverse; refuse it here, as the server does, with the flags to fix.
        if bool(self.tls_cert_file) != bool(self.tls_key_file):
            given, missing = (
                ("tls_cert_file (--tls-cert)", "tls_key_file (--tls-key)")
                if self.tls_cert_file
                else ("tls_key_file (--tls-key)", "tls_cert_file (--tls-cert)")
            )
            raise InvalidConfigError(
                f"a client certificate for mutual TLS needs both files: {given} is set, "
                f"{missing} is not; pass both, or neither"
            )
        if self.request_timeout_ms <= 0:
            raise InvalidConfigError(
                f"request_timeout_ms is {self.request_timeout_ms}; it must be > 0"
            )

    @property
    def uses_tls(self) -> bool:
        return bool(self.tls or self.tls_ca_file or self.tls_cert_file)

    def resolved_token(self) -> str | None:
        return self.token or os.environ.get(TOKEN_ENVIRONMENT) or None


Target = str | BrokerApi


def connect(target: Target, options: ConnectionOptions | None = None) -> tuple[BrokerApi, bool]:
    """(broker, owned): ``owned`` is True when the caller opened it and must close it."""
    if isinstance(target, str):
        from rpc.client.remote import RemoteBroker

        return RemoteBroker(target, options or ConnectionOptions()), True
    if isinstance(target, BrokerApi):
        return target, False
    raise InvalidConfigError(
        f"target {target!r} is neither a server address ('host:port') nor a broker; "
        "pass '127.0.0.1:7070' or an engine.Broker"
    )
