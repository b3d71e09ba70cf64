"""How a client reaches a server: token, TLS files, request deadline (``ConnectionOptions``)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from twinlog.engine.base.config_rules import POSITIVE, ConfigRules, Flag
from twinlog.engine.base.errors import InvalidConfigError

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
        RULES.check(self)
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

    @property
    def uses_tls(self) -> bool:
        return bool(self.tls or self.tls_ca_file or self.tls_cert_file)

    def resolved_token(self) -> str | None:
        return self.token or os.environ.get(TOKEN_ENVIRONMENT) or None


RULES = ConfigRules(
    "connection option",
    {"tls": Flag(), "request_timeout_ms": POSITIVE},
    # The token and the files are used as given: the server, or reading them, says what
    # is wrong; the certificate and key go in pairs, checked above.
    free=("token", "tls_ca_file", "tls_cert_file", "tls_key_file", "tls_server_name"),
)
