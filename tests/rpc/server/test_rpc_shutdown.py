"""Graceful shutdown on SIGTERM/SIGINT, and recovery after SIGKILL, of a real server."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest
from server_process import ServerProcess

from twinlog.engine.base.errors import TwinlogError
from twinlog.engine.base.types import FetchResult
from twinlog.engine.records.batch_builder import build_batch
from twinlog.rpc.client import Admin, Consumer, Producer
from twinlog.rpc.client.remote import RemoteBroker

pytestmark = [pytest.mark.slow, pytest.mark.crash]


def read_values(address: str, topic: str, partitions: int, count: int) -> list[bytes | None]:
    with Consumer(address) as consumer:
        consumer.assign([(topic, p) for p in range(partitions)])
        consumer.seek_to_beginning()
        values: list[bytes | None] = []
        deadline = time.monotonic() + 10
        while len(values) < count and time.monotonic() < deadline:
            values.extend(record.value for record in consumer.poll(200))
        values.extend(record.value for record in consumer.poll(100))
        return values


@pytest.mark.parametrize("signal_number", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_graceful_stop_finishes_in_flight_and_restarts(tmp_path: Path, signal_number: int) -> None:
    server = ServerProcess(tmp_path / "data").start()
    try:
        with Admin(server.address) as admin:
            admin.create_topic("graceful", 1)
        with Producer(server.address) as producer:
            for i in range(50):
                producer.send("graceful", f"{i}".encode(), partition=0)
        # A long poll in flight when the signal comes: it must end (answered), not hang.
        answers: list[FetchResult | TwinlogError] = []
        remote = RemoteBroker(server.address)

        def long_poll() -> None:
            try:
                answers.append(remote.fetch("graceful", 0, 50, max_wait_ms=20_000))
            except TwinlogError as error:
                answers.append(error)

        thread = threading.Thread(target=long_poll)
        thread.start()
        time.sleep(0.3)
        started = time.monotonic()
        # A clean stop: 0 on SIGTERM, 130 on Ctrl-C (as every twinlog command)
        expected = 130 if signal_number == signal.SIGINT else 0
        assert server.stop(signal_number) == expected, server.log()
        thread.join(timeout=10)
        remote.close()
        assert time.monotonic() - started < 10
        assert answers and isinstance(answers[0], FetchResult), answers
        log = server.log()
        assert "refusing new requests" in log and "stopped cleanly" in log
    finally:
        server.kill()
    with ServerProcess(tmp_path / "data") as again:
        values = read_values(again.address, "graceful", 1, 50)
        assert values == [f"{i}".encode() for i in range(50)]


def test_an_open_producer_does_not_hold_the_stop_and_sends_again_after_it(
    tmp_path: Path,
) -> None:
    """A producer's stream is open as long as the producer: a stop ends it once what it
    took is answered instead of waiting out the whole grace, and the producer's next send
    reaches the server started again (on a new stream)."""
    server = ServerProcess(tmp_path / "data", "--config", "shutdown_grace_ms=30000").start()
    port = server.port
    producer = Producer(server.address)
    try:
        with Admin(server.address) as admin:
            admin.create_topic("idle", 1)
        producer.send("idle", b"before", partition=0)
        producer.flush()
        started = time.monotonic()
        assert server.stop(signal.SIGTERM) == 0, server.log()
        assert time.monotonic() - started < 15, "the stop waited out the open producer's grace"
        again = ServerProcess(tmp_path / "data").start(port=port)  # where the producer looks
        try:
            producer.send("idle", b"after", partition=0)
            producer.flush()
            assert read_values(again.address, "idle", 1, 2) == [b"before", b"after"]
        finally:
            producer.close()
            again.kill()
    finally:
        producer.close()
        server.kill()


def test_restart_after_sigkill_recovers(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data").start()
    try:
        with Admin(server.address) as admin:
            admin.create_topic("killed", 2)
        with Producer(server.address) as plain:
            for i in range(20):
                plain.send("killed", f"plain-{i}".encode(), partition=i % 2)
        committed = Producer(server.address, transactional_id="killed-app")
        committed.init_transactions()
        with committed.transaction():
            for partition in range(2):
                committed.send("killed", f"txn-{partition}".encode(), partition=partition)
        committed.begin_transaction()  # left open when the server dies
        committed.send("killed", b"never committed", partition=0)
        committed.flush()
        server.stop(signal.SIGKILL)
        committed.close(timeout_ms=1_000)
    finally:
        server.kill()
    with ServerProcess(tmp_path / "data") as again:
        values = read_values(again.address, "killed", 2, 22)
        assert sorted(v for v in values if v is not None) == sorted(
            [f"plain-{i}".encode() for i in range(20)] + [b"txn-0", b"txn-1"]
        )
        with Producer(again.address, transactional_id="killed-app") as successor:
            successor.init_transactions()  # fences and aborts the open transaction
        with Admin(again.address) as admin:
            assert not [t for t in admin.list_transactions() if t.transactional_id == "killed-app"]
        assert b"never committed" not in read_values(again.address, "killed", 2, 22)


def test_refuses_public_address_without_auth(tmp_path: Path) -> None:
    from server_process import run_cli

    result = run_cli("serve", "--data-dir", str(tmp_path / "data"), "--host", "0.0.0.0")
    assert result.returncode == 1
    assert "not a loopback address" in result.stderr and "--insecure" in result.stderr


def test_second_server_on_same_port_fails_clearly(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "one") as first:
        second = ServerProcess(tmp_path / "two")
        with pytest.raises(AssertionError) as failure:
            second.start(port=first.port)
        assert "port is in use" in str(failure.value)
        with RemoteBroker(first.address) as remote:
            remote.create_topic("still-served", 1)
            remote.produce("still-served", 0, build_batch([b"ok"]))
