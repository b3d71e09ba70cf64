"""``twinlog serve --kafka-listener``: a real server process serves Kafka clients and gRPC
clients on the same broker, and SIGTERM stops both."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import kafka
import pytest
from server_process import ServerProcess, environment

from twinlog.engine.base.errors import InvalidConfigError
from twinlog.rpc.cli.serve import kafka_listener_opener
from twinlog.rpc.client import Admin, Consumer
from twinlog.rpc.server.config import ServerConfig

KAFKA_SERVING = re.compile(r"serving Kafka clients on 127\.0\.0\.1:(\d+)")
CLIENT_TIMEOUT_MS = 10_000


def _kafka_port(process: ServerProcess) -> int:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        found = KAFKA_SERVING.search(process.log())
        if found:
            return int(found.group(1))
        time.sleep(0.05)
    raise AssertionError(f"no Kafka listener in the log:\n{process.log()}")


def test_serve_with_a_kafka_listener(tmp_path: Path) -> None:
    process = ServerProcess(tmp_path / "data", "--kafka-listener", "127.0.0.1:0").start()
    try:
        kafka_port = _kafka_port(process)
        with Admin(process.address) as admin:
            admin.create_topic("orders", partitions=1)
        producer = kafka.KafkaProducer(
            bootstrap_servers=f"127.0.0.1:{kafka_port}",
            request_timeout_ms=CLIENT_TIMEOUT_MS,
            max_block_ms=CLIENT_TIMEOUT_MS,
        )
        try:
            producer.send("orders", b"through kafka", key=b"k").get(timeout=10)
        finally:
            producer.close(timeout=5)
        with Consumer(process.address) as consumer:  # over gRPC, from the same broker
            consumer.assign([("orders", 0)])
            consumer.seek_to_beginning()
            found = []
            deadline = time.monotonic() + 10
            while not found and time.monotonic() < deadline:
                found = consumer.poll(timeout_ms=500)
        assert [(r.key, r.value) for r in found] == [(b"k", b"through kafka")]
    finally:
        status = process.stop()
    assert status == 0, process.log()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", kafka_port), timeout=2).close()


@pytest.mark.parametrize(
    "address, config, refusal",
    [
        ("127.0.0.1", ServerConfig(), "write HOST:PORT"),
        ("0.0.0.0:9092", ServerConfig(), "loopback address only"),
        (
            "127.0.0.1:0",
            ServerConfig(tls_cert_file="missing.pem", tls_key_file="missing.key"),
            "cannot read missing.pem",
        ),
    ],
)
def test_a_kafka_listener_it_cannot_serve_safely_is_refused(
    address: str, config: ServerConfig, refusal: str
) -> None:
    with pytest.raises((SystemExit, InvalidConfigError)) as refused:
        kafka_listener_opener(address, config)
    assert refusal in str(refused.value)


def test_serve_refuses_before_opening_the_broker(tmp_path: Path) -> None:
    completed = subprocess.run(
        [
            *(sys.executable, "-m", "twinlog.rpc.cli", "serve", "--data-dir", "data"),
            *("--kafka-listener", "0.0.0.0:9092"),
        ],
        cwd=tmp_path,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode != 0
    assert "loopback address only" in completed.stderr
    assert not (tmp_path / "data").exists()


def test_the_per_address_connection_cap_is_a_serve_flag(tmp_path: Path) -> None:
    """--kafka-connections-per-address-max 2: a third connection from 127.0.0.1 is closed
    at once while the first two stay open."""
    process = ServerProcess(
        tmp_path / "data",
        "--kafka-listener", "127.0.0.1:0",
        "--kafka-connections-per-address-max", "2",
    ).start()  # fmt: skip
    sockets = []
    try:
        kafka_port = _kafka_port(process)
        for _ in range(3):
            sockets.append(socket.create_connection(("127.0.0.1", kafka_port), timeout=5))
        sockets[2].settimeout(5)
        assert sockets[2].recv(1) == b""  # closed by the server: over the cap
        sockets[0].settimeout(0.3)
        with pytest.raises(TimeoutError):
            sockets[0].recv(1)  # still open: within the cap (and its first-request time)
    finally:
        for opened in sockets:
            opened.close()
        process.stop()
