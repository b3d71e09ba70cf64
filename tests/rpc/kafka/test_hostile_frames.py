"""Frames no client would send: a served API key and version with random bytes after the
header. Each is answered or its connection closed, promptly, and the listener serves the
next connection as before."""

from __future__ import annotations

import logging
import random
import socket
import struct
import time
from typing import Any

import pytest
from kafka.protocol.api_header import RequestHeader
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from twinlog.rpc.kafka.dispatch import SERVED_APIS

SEEDS = range(3)
BODY_BYTES_MAX = 64


def _answered_or_closed(port: int, frame: bytes) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as connection:
        connection.sendall(struct.pack(">i", len(frame)) + frame)
        try:
            prefix = connection.recv(4)
        except TimeoutError:
            return False
        return prefix == b"" or len(prefix) > 0


def test_random_bodies_never_hang_or_break_the_listener(
    kafka_server: Any, raw: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="twinlog.kafka")
    port = kafka_server.listener.port
    tried = 0
    for api in SERVED_APIS:
        for version in range(api.min_version, api.max_version + 1):
            for seed in SEEDS:
                chance = random.Random(f"{api.request_class.__name__}-{version}-{seed}")
                header = RequestHeader(
                    request_api_key=api.request_class.API_KEY,
                    request_api_version=version,
                    correlation_id=seed,
                    client_id="hostile",
                )
                body = chance.randbytes(chance.randrange(BODY_BYTES_MAX))
                frame = bytes(header.encode(flexible=False)) + body
                assert _answered_or_closed(port, frame), (api.request_class.__name__, version)
                tried += 1
    assert tried > 200
    assert raw.call(ApiVersionsRequest(), ApiVersionsResponse, 3).error_code == 0
    deadline = time.monotonic() + 5
    while kafka_server.listener.connection_count() > 1 and time.monotonic() < deadline:
        time.sleep(0.01)  # the closed connections' threads end
    assert kafka_server.listener.connection_count() == 1  # this test's raw connection
    # a handler that raised (not a refusal the listener meant) logs at ERROR
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
