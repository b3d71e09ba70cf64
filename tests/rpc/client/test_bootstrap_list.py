"""Kafka's ``bootstrap_servers`` with several addresses is a bootstrap list: the clients
ask the first address that answers, so a list whose first broker is down still reaches a
real ``twinlog serve`` (before, only the first address was used)."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
from server_process import ServerProcess

from twinlog.rpc.client import Admin, Consumer, Producer

pytestmark = [pytest.mark.slow]
TIMEOUT_MS = 10_000


def _closed_address() -> str:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


def test_every_client_reaches_the_server_past_a_dead_first_address(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "data") as server:
        as_text = f"{_closed_address()},{server.address}"
        as_list = [_closed_address(), server.address]
        with Admin(bootstrap_servers=as_text, request_timeout_ms=TIMEOUT_MS) as admin:
            admin.create_topic("listed", 1)
        with Producer(bootstrap_servers=as_list, max_block_ms=TIMEOUT_MS) as producer:
            metadata = producer.send("listed", b"through the list", partition=0).result(
                timeout=TIMEOUT_MS / 1000
            )
        assert (metadata.topic, metadata.offset) == ("listed", 0)
        with Consumer(
            bootstrap_servers=as_text, request_timeout_ms=TIMEOUT_MS, auto_offset_reset="earliest"
        ) as consumer:
            consumer.assign([("listed", 0)])
            values: list[bytes | None] = []
            deadline = time.monotonic() + TIMEOUT_MS / 1000
            while not values and time.monotonic() < deadline:
                values.extend(record.value for record in consumer.poll(200))
        assert values == [b"through the list"]
