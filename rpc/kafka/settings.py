"""Limits of the Kafka listener, with units in every name (every queue and wait is bounded)."""

from __future__ import annotations

from dataclasses import dataclass

from twinlog.engine.base.config_rules import POSITIVE, ConfigRules
from twinlog.engine.base.units import KIBIBYTE, MEBIBYTE

# A frame may be this much larger than the largest request body it carries (headers and
# the request's own fields around the records).
FRAME_BYTES_MARGIN = 64 * KIBIBYTE


@dataclass(frozen=True)
class KafkaListenerSettings:
    # A request frame larger than this is refused: the connection is closed with a log line
    # naming the size (Kafka's socket.request.max.bytes does the same, at 100 MiB).
    frame_bytes_max: int = 16 * MEBIBYTE + FRAME_BYTES_MARGIN
    connections_max: int = 256  # more are accepted, logged and closed at once
    # Connections open at once from one IP address (more are accepted, logged and closed,
    # as over connections_max), so that one address cannot take every slot. Loopback
    # clients all share 127.0.0.1: keep it well above what one host's clients open.
    connections_per_address_max: int = 64
    # An idle connection is closed after this long (Kafka's connections.max.idle.ms).
    connection_idle_ms: int = 600_000
    # A TLS listener's client must finish its handshake within this long of connecting,
    # or it is logged and closed (one that sends nothing or garbage holds a thread no longer).
    tls_handshake_ms: int = 10_000
    # A connection's first request must have arrived this long after it is ready for
    # requests (connected, or its TLS handshake done); else it is logged and closed, so a
    # client that connects and says nothing holds a slot seconds, not connection_idle_ms.
    first_request_ms: int = 5_000
    # With a tokens file, SASL authentication must be done this long after the connection
    # is ready for requests, however busy it keeps with ApiVersions; else logged and closed.
    authentication_ms: int = 10_000
    fetch_bytes_max: int = 16 * MEBIBYTE  # a Fetch asking for more gets this much
    fetch_wait_ms_max: int = 30_000  # a Fetch never waits longer, whatever it asks
    # A waiting Fetch waits on all its partitions at once in the broker's purgatory (an
    # append to any of them wakes it), and re-reads them and checks for shutdown this often.
    fetch_wait_slice_ms: int = 100
    # A member of a KIP-848 consumer group (ConsumerGroupHeartbeat) is removed when no
    # heartbeat came for this long (Kafka's group.consumer.session.timeout.ms, a broker
    # setting in that protocol, not the client's; the server config key of that name).
    group_consumer_session_timeout_ms: int = 45_000

    def __post_init__(self) -> None:
        RULES.check(self)


# Every limit is a size, a count or a wait: at least 1 (0 connections would refuse every
# client; a wait of 0 would spin).
RULES = ConfigRules(
    "Kafka listener setting",
    {
        "frame_bytes_max": POSITIVE,
        "connections_max": POSITIVE,
        "connections_per_address_max": POSITIVE,
        "connection_idle_ms": POSITIVE,
        "tls_handshake_ms": POSITIVE,
        "first_request_ms": POSITIVE,
        "authentication_ms": POSITIVE,
        "fetch_bytes_max": POSITIVE,
        "fetch_wait_ms_max": POSITIVE,
        "fetch_wait_slice_ms": POSITIVE,
        # (the coordinator holds it to its bounds, as the server config key does)
        "group_consumer_session_timeout_ms": POSITIVE,
    },
    # The one set by a flag of its own (the others by their defaults)
    labels={
        "connections_per_address_max": (
            "connections_per_address_max (twinlog serve --kafka-connections-per-address-max)"
        )
    },
)
