"""The channel a follower opens to a leader broker: the client's limits and keepalive.

The values repeat ``rpc/client/remote.py``'s (this floor sits below the client, so it
cannot import them; tests/rpc/replication checks they stay equal). Reconnect backoff is
capped low: a leader that restarted is fetched from again within about a second, not
after gRPC's default of up to two minutes.
"""

from __future__ import annotations

from typing import Any

import grpc

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
    address: str, options: tuple[tuple[str, Any], ...] = CHANNEL_OPTIONS
) -> grpc.Channel:
    """A plaintext channel (TLS and tokens between brokers come later: CLUSTER.md phase 2)."""
    return grpc.insecure_channel(address, options=list(options))
