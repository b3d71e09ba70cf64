"""Settings of the gRPC server, with units in every name, and where they come from.

``twinlog serve`` takes ``--config key=value`` (repeatable) and ``--config-file
FILE`` (``key=value`` lines, ``#`` comments). Keys named here configure the server;
every other key goes to the broker (``twinlog.engine.broker.config``), which refuses
unknown ones. Command-line flags (``--host``, ``--tls-cert``, ...) win over both.
"""

from __future__ import annotations

import dataclasses
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from twinlog.engine.base.addresses import join_host_port
from twinlog.engine.base.config_rules import (
    NON_NEGATIVE,
    POSITIVE,
    ConfigRules,
    Flag,
    Integer,
    Port,
    Text,
    unknown_key,
)
from twinlog.engine.base.cpu_affinity import CPU_AFFINITY_DEFAULT, DESCRIPTION, is_cpu_affinity
from twinlog.engine.base.errors import InvalidConfigError
from twinlog.engine.base.renamed_keys import canonical_key
from twinlog.engine.base.units import MEBIBYTE

LOOPBACK_NAMES = ("localhost",)

RULES = ConfigRules(
    "server config",
    {
        "port": Port(any_port=True),
        "request_bytes_max": POSITIVE,
        "fetch_bytes_max": POSITIVE,
        "fetch_wait_ms_max": POSITIVE,
        "long_poll_slice_ms": POSITIVE,
        "worker_threads": POSITIVE,
        "produce_streams_max": Integer(0, minus_one="auto"),  # and below worker_threads
        "long_polls_max": Integer(0, minus_one="auto"),  # and, with streams, below threads
        "long_polls_per_principal_max": Integer(0, minus_one="auto"),
        "long_polls_per_connection_max": Integer(0, minus_one="auto"),
        "shutdown_grace_ms": NON_NEGATIVE,
        "metrics_port": Port(any_port=True, minus_one="no metrics endpoint"),
        "metrics_host": Text(
            lambda host: bool(host.strip("[]")),
            "an address (0.0.0.0 for every interface, with --metrics-token-file)",
        ),
        "request_log_slow_ms": NON_NEGATIVE,
        "cpu_affinity": Text(is_cpu_affinity, DESCRIPTION),
        # the coordinator's bounds (engine/groups/group_membership)
        "group_consumer_session_timeout_ms": Integer(1_000, 300_000),
        "reflection": Flag(),
        "insecure": Flag(),
    },
    # Hosts and files: their use says what is wrong with them (a host that does not
    # resolve, a file that cannot be read); the pairs of TLS files are checked below.
    free=(
        "host",
        "metrics_token_file",
        "metrics_tls_cert_file",
        "metrics_tls_key_file",
        "tokens_file",
        "acl_file",
        "tls_cert_file",
        "tls_key_file",
        "tls_client_ca_file",
    ),
    loose_keys=True,  # dots and dashes for underscores, as the broker's keys
)


@dataclass(frozen=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 7070  # 0: any free port (the chosen one is logged)
    # Limits (TigerBeetle style: every queue and request has one, and they live here)
    # One gRPC message, refused (BatchTooLargeError) before it is decoded: a guard of the
    # server's memory. A batch's own limit is its topic's, checked by the broker (the
    # broker key batch_bytes_max, per topic max.message.bytes).
    request_bytes_max: int = 16 * MEBIBYTE
    fetch_bytes_max: int = 16 * MEBIBYTE  # a fetch asking for more gets this much
    fetch_wait_ms_max: int = 30_000  # a long poll never waits longer
    long_poll_slice_ms: int = 200  # a long poll rechecks shutdown and cancellation this often
    worker_threads: int = 128  # concurrent requests (each long poll and produce stream holds one)
    # Open ProduceStream calls, each holding a worker thread for as long as it is open (one per
    # producer); -1: half of worker_threads, so unary calls always find a thread. A stream
    # over the limit is refused and the client sends unary Produce calls instead.
    produce_streams_max: int = -1
    # Long polls waiting at once, each holding a worker thread while it waits (grpcio's sync
    # server has no purgatory). -1: a quarter of worker_threads (fewer if the produce
    # streams leave less). A long poll without a slot gets what is there at once, or, if
    # nothing is, a retriable NotEnoughResourcesError (the consumer backs off). Together
    # with produce_streams_max it stays below worker_threads: the rest serve other calls.
    long_polls_max: int = -1
    # Of those, one principal's (-1: half of long_polls_max; the anonymous principal of a
    # server without authentication is not one) and one connection's (-1: half too).
    long_polls_per_principal_max: int = -1
    long_polls_per_connection_max: int = -1
    shutdown_grace_ms: int = 10_000  # in-flight requests get this long on SIGTERM
    # Observability (docs/operations.md)
    metrics_port: int = -1  # Prometheus /metrics on metrics_host:port; -1: none, 0: any free
    # Loopback unless told otherwise, whatever ``host`` is: the metrics name every topic
    # and group. Elsewhere, give it a token (and TLS, so the token is not sent in clear).
    metrics_host: str = "127.0.0.1"
    metrics_token_file: str | None = None  # the bearer token a scrape must send
    metrics_tls_cert_file: str | None = None  # with the key: HTTPS only
    metrics_tls_key_file: str | None = None
    request_log_slow_ms: int = 1_000  # a unary call this slow is logged at INFO, not DEBUG
    # The CPUs the server's threads run on (engine/base/cpu_affinity.py): "one" (of those
    # it may use, a cluster broker's by its broker id), "all", or a list such as "0,2-3".
    # One CPU by default: its threads hand the GIL over hundreds of times a transaction,
    # and across cores each hand-over costs the scheduler more than the work it moves.
    cpu_affinity: str = CPU_AFFINITY_DEFAULT
    # Kafka listener: a KIP-848 consumer group member (group.protocol=consumer) silent this
    # long is removed (Kafka's group.consumer.session.timeout.ms, the broker's in that protocol)
    group_consumer_session_timeout_ms: int = 45_000
    # gRPC server reflection on the client port, for grpcurl (rpc/server/reflection.py)
    reflection: bool = True
    # Security
    insecure: bool = False  # allow a non-loopback address without authentication
    tokens_file: str | None = None  # "TOKEN PRINCIPAL" lines; enables authentication
    acl_file: str | None = None  # "PRINCIPAL OPERATION PATTERN" lines (auth.py): authorisation
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_client_ca_file: str | None = None  # set: clients must present a certificate (mTLS)

    def __post_init__(self) -> None:
        RULES.check(self)
        if self.produce_streams_max >= self.worker_threads:
            raise RULES.refuse(
                "produce_streams_max",
                self.produce_streams_max,
                f"-1 (auto) or 0..{self.worker_threads - 1} (below worker_threads, so unary "
                "calls get a thread)",
            )
        if self.produce_streams_limit + self.long_polls_limit >= self.worker_threads:
            room = self.worker_threads - self.produce_streams_limit - 1
            raise RULES.refuse(
                "long_polls_max",
                self.long_polls_max,
                f"-1 (auto) or 0..{room}: with produce_streams_max "
                f"({self.produce_streams_limit}) it stays below worker_threads "
                f"({self.worker_threads}), so that other calls always find a thread",
            )
        if (self.metrics_tls_cert_file is None) != (self.metrics_tls_key_file is None):
            raise InvalidConfigError(
                "metrics over TLS needs both --metrics-tls-cert and --metrics-tls-key"
            )
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise InvalidConfigError("TLS needs both --tls-cert and --tls-key")
        if self.tls_client_ca_file and not self.tls_cert_file:
            raise InvalidConfigError("--tls-client-ca (mutual TLS) needs --tls-cert and --tls-key")

    @property
    def produce_streams_limit(self) -> int:
        if self.produce_streams_max == -1:
            return self.worker_threads // 2
        return self.produce_streams_max

    @property
    def long_polls_limit(self) -> int:
        if self.long_polls_max == -1:
            room = self.worker_threads - self.produce_streams_limit - 1
            return max(0, min(self.worker_threads // 4, room))
        return self.long_polls_max

    @property
    def long_polls_per_principal_limit(self) -> int:
        if self.long_polls_per_principal_max == -1:
            return max(1, self.long_polls_limit // 2)
        return self.long_polls_per_principal_max

    @property
    def long_polls_per_connection_limit(self) -> int:
        if self.long_polls_per_connection_max == -1:
            return max(1, self.long_polls_limit // 2)
        return self.long_polls_per_connection_max

    @property
    def address(self) -> str:
        return join_host_port(self.host, self.port)

    @property
    def is_loopback(self) -> bool:
        if self.host in LOOPBACK_NAMES:
            return True
        try:
            return ipaddress.ip_address(self.host.strip("[]")).is_loopback
        except ValueError:
            return False

    @property
    def authentication_configured(self) -> bool:
        return bool(self.tokens_file or self.tls_client_ca_file)

    def check_exposure(self) -> str | None:
        """Refuse a non-loopback bind without authentication; the warning to log, if any
        (the gRPC server's and the metrics endpoint's, joined by "; ")."""
        warnings = [self._grpc_exposure(), self.metrics_exposure()]
        return "; ".join(warning for warning in warnings if warning) or None

    def metrics_exposure(self) -> str | None:
        """The warning for a metrics endpoint others can reach, if any. Only a warning:
        the metrics show names and sizes, never records or credentials."""
        if self.metrics_port < 0 or ServerConfig(host=self.metrics_host).is_loopback:
            return None
        if self.metrics_token_file is None:
            return (
                f"serving metrics on {self.metrics_host} without a token: anyone who can reach "
                "it sees every topic and group name; add --metrics-token-file (and "
                "--metrics-tls-cert/--metrics-tls-key), or --metrics-host 127.0.0.1"
            )
        if self.metrics_tls_cert_file is None:
            return (
                f"serving metrics on {self.metrics_host} without TLS: the metrics token "
                "travels in clear; add --metrics-tls-cert and --metrics-tls-key"
            )
        return None

    def _grpc_exposure(self) -> str | None:
        if self.is_loopback:
            return None
        if self.authentication_configured:
            if not self.tls_cert_file:
                return (
                    f"serving on {self.address} without TLS: bearer tokens travel in clear; "
                    "add --tls-cert and --tls-key"
                )
            return None
        if self.insecure:
            return (
                f"serving on {self.address} with --insecure: anyone who can reach this "
                "address can read, write and delete every topic"
            )
        raise InvalidConfigError(
            f"refusing to listen on {self.host}, which is not a loopback address, without "
            "authentication: add --tokens-file (and --tls-cert/--tls-key), or --insecure "
            "if this network is trusted"
        )


SERVER_KEYS = frozenset(item.name for item in fields(ServerConfig))


def parse_pairs(pairs: Iterable[str], origin: str) -> dict[str, str]:
    """``key=value`` strings to a dict; keys may use dots or dashes for underscores."""
    parsed: dict[str, str] = {}
    for pair in pairs:
        pair = pair.strip()
        if not pair or pair.startswith("#"):
            continue
        key, separator, value = pair.partition("=")
        if not separator or not key.strip():
            raise InvalidConfigError(f"{origin}: {pair!r} is not key=value")
        parsed[key.strip()] = value.strip()
    return parsed


def read_config_file(path: str | Path) -> dict[str, str]:
    try:
        text = Path(path).read_text()
    except OSError as error:
        raise InvalidConfigError(f"cannot read config file {path}: {error.strerror}") from None
    return parse_pairs(text.splitlines(), f"config file {path}")


def _normalise(key: str) -> str:
    return canonical_key(key.replace(".", "_").replace("-", "_"))


def split_config(values: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(server keys, broker keys) of one mapping; a key known to neither is refused.

    A key is one side's only: ``batch_bytes_max`` is the broker's (the default of its
    topics' limit), and the server has no second one.
    """
    from twinlog.engine.broker.config import BrokerConfig

    broker_keys = {item.name for item in fields(BrokerConfig)}
    server: dict[str, Any] = {}
    broker: dict[str, Any] = {}
    for key, value in values.items():
        name = _normalise(key)
        if name in SERVER_KEYS:
            server[name] = value
        elif name in broker_keys:
            broker[key] = value
        else:
            raise unknown_key("server or broker config", key, SERVER_KEYS | broker_keys)
    return server, broker


def check_a_batch_fits_a_request(config: ServerConfig, broker_values: Mapping[str, Any]) -> None:
    """InvalidConfigError (before the broker opens) when the broker's ``batch_bytes_max``,
    its topics' default limit, is over ``request_bytes_max``: such a batch could never
    reach the broker through either door."""
    from twinlog.engine.broker.config import BrokerConfig

    batch_bytes_max = BrokerConfig.from_mapping(broker_values).batch_bytes_max
    if batch_bytes_max > config.request_bytes_max:
        raise InvalidConfigError(
            f"broker config batch_bytes_max ({batch_bytes_max}) exceeds server config "
            f"request_bytes_max ({config.request_bytes_max}); a batch must fit in a request: "
            "raise request_bytes_max too"
        )


def server_config_from(values: Mapping[str, Any]) -> ServerConfig:
    """Build from strings (files, --config) or typed values (flags)."""
    return dataclasses.replace(ServerConfig(), **RULES.values_from(values))
