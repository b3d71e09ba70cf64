"""The channel a broker opens to another (a follower to its leader, a coordinator to a
partition leader): the client's limits and keepalive, and the broker's certificate.

The values repeat ``rpc/client/remote.py``'s (this floor sits below the client, so it
cannot import them; tests/rpc/replication checks they stay equal). Reconnect backoff is
capped low: a leader that restarted is fetched from again within about a second, not
after gRPC's default of up to two minutes.
"""

from __future__ import annotations

from typing import Any

import grpc

from twinlog.rpc.replication.broker_identity import BrokerTls

MESSAGE_BYTES_MAX = 64 * 1024 * 1024  # rpc/client/request_size.MESSAGE_BYTES_MAX
KEEPALIVE_OPTIONS: tuple[tuple[str, int], ...] = (  # rpc/client/remote.KEEPALIVE_OPTIONS
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
)
RECONNECT_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1_000),
)
CHANNEL_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("grpc.max_receive_message_length", MESSAGE_BYTES_MAX),
    ("grpc.max_send_message_length", MESSAGE_BYTES_MAX),
    *KEEPALIVE_OPTIONS,
    *RECONNECT_OPTIONS,
)


def open_channel(
    address: str,
    options: tuple[tuple[str, Any], ...] = CHANNEL_OPTIONS,
    tls: BrokerTls | None = None,
    broker_id: int | None = None,
) -> grpc.Channel:
    """A channel to ``address``: with ``tls``, mutual TLS that accepts only broker
    ``broker_id``'s certificate (``broker_identity``); plaintext without (a cluster whose
    brokers have no certificates, or a client)."""
    if tls is None:
        return grpc.insecure_channel(address, options=list(options))
    assert broker_id is not None, "a broker channel with TLS names the broker it reaches"
    return grpc.secure_channel(
        address,
        tls.channel_credentials(),
        options=[*options, *tls.channel_options(broker_id)],
    )
