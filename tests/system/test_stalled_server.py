"""No client call waits forever on a server that stops answering.

The server is a real ``twinlog serve`` process, stalled two ways: SIGSTOPped (a long
GC pause, a hung disk) or behind a TCP proxy that holds every byte while keeping the
connections open (a partition that drops packets). Either way the client sees no
error, only silence; its deadlines must turn that into RequestTimedOutError within
its settings: a record at ``delivery_timeout_ms``, a call at its ``timeout_ms`` or
``default_api_timeout_ms``, ``poll`` at about its own timeout. Once the server runs
again, a record that failed is absent or present, never duplicated: a retried batch
keeps its sequence (the broker drops the repeat) and an aborted transaction is never
read.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from server_process import ServerProcess
from tcp_proxy import HoldingProxy

from twinlog.engine.base.errors import RequestTimedOutError
from twinlog.rpc.client import Admin, Consumer, Producer

pytestmark = [pytest.mark.slow]

REQUEST_TIMEOUT_MS = 2_000
DELIVERY_TIMEOUT_MS = 3_000
API_TIMEOUT_MS = 4_000  # above the delivery timeout: commit sees the record expire
SLACK_S = 1.5  # scheduling on a busy machine; every bound below is setting + this
READ_WAIT_S = 15.0


@dataclass
class Stall:
    kind: str
    address: str  # where clients connect
    stall: Callable[[], None]
    resume: Callable[[], None]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    directory = tmp_path_factory.mktemp("stall")
    process = ServerProcess(directory / "data").start()
    try:
        yield process
    finally:
        if process.process is not None and process.process.poll() is None:
            process.process.send_signal(signal.SIGCONT)
            assert process.stop() == 0, process.log()[-5000:]


@pytest.fixture(params=["sigstop", "proxy"])
def stall(request: pytest.FixtureRequest, server: ServerProcess) -> Iterator[Stall]:
    assert server.process is not None
    pid = server.process.pid
    if request.param == "sigstop":
        yield_value = Stall(
            "sigstop",
            server.address,
            lambda: os.kill(pid, signal.SIGSTOP),
            lambda: os.kill(pid, signal.SIGCONT),
        )
        try:
            yield yield_value
        finally:
            os.kill(pid, signal.SIGCONT)
        return
    with HoldingProxy(server.port) as proxy:
        try:
            yield Stall("proxy", proxy.address, proxy.hold, proxy.release)
        finally:
            proxy.release()


def elapsed_s(started_s: float) -> float:
    return time.monotonic() - started_s


def create_topic(address: str, name: str) -> None:
    with Admin(address) as admin:
        admin.create_topic(name, 1)


def read_all(address: str, topic: str, expected: int) -> list[bytes | None]:
    """Every value of partition 0; waits (bounded) until at least ``expected`` are there."""
    values: list[bytes | None] = []
    with Consumer(address, auto_offset_reset="earliest") as consumer:
        consumer.assign([(topic, 0)])
        deadline_s = time.monotonic() + READ_WAIT_S
        while len(values) < expected and time.monotonic() < deadline_s:
            values.extend(record.value for record in consumer.poll(200))
        values.extend(record.value for record in consumer.poll(300))
    return values


def fast_producer(address: str, **settings: object) -> Producer:
    return Producer(
        address,
        linger_ms=0,
        request_timeout_ms=REQUEST_TIMEOUT_MS,
        delivery_timeout_ms=DELIVERY_TIMEOUT_MS,
        default_api_timeout_ms=API_TIMEOUT_MS,
        **settings,  # type: ignore[arg-type]
    )


def test_records_fail_at_their_delivery_deadline_and_flush_and_close_are_bounded(
    stall: Stall,
) -> None:
    topic = f"records-{stall.kind}"
    create_topic(stall.address, topic)
    producer = fast_producer(stall.address)
    try:
        producer.send(topic, b"before", partition=0).result(timeout=10)
        stall.stall()
        started_s = time.monotonic()
        during = producer.send(topic, b"during", partition=0)
        error = during.exception(timeout=DELIVERY_TIMEOUT_MS / 1000 + 10)
        waited_s = elapsed_s(started_s)
        assert isinstance(error, RequestTimedOutError), repr(error)
        assert error.retriable
        assert f"expired after delivery_timeout_ms={DELIVERY_TIMEOUT_MS}" in str(error)
        # not before its deadline (the first request timed out at 2 s and was retried)...
        assert waited_s >= DELIVERY_TIMEOUT_MS / 1000 * 0.95, waited_s
        # ...and not long after
        assert waited_s < DELIVERY_TIMEOUT_MS / 1000 + SLACK_S, waited_s

        started_s = time.monotonic()
        producer.flush()  # every record has its outcome already
        assert elapsed_s(started_s) < SLACK_S

        closing = producer.send(topic, b"closing", partition=0)
        started_s = time.monotonic()
        producer.close()  # no timeout: bounded by the queued record's delivery deadline
        assert elapsed_s(started_s) < DELIVERY_TIMEOUT_MS / 1000 + SLACK_S
        assert isinstance(closing.exception(timeout=0), RequestTimedOutError)
    finally:
        stall.resume()
        producer.close(timeout_ms=0)

    with fast_producer(stall.address) as again:  # the server works again
        again.send(topic, b"after", partition=0).result(timeout=10)
    values = read_all(stall.address, topic, expected=2)
    assert values.count(b"before") == 1 and values.count(b"after") == 1, values
    # failed: absent, or present once (a retry repeats its sequence; the broker drops it)
    assert values.count(b"during") <= 1 and values.count(b"closing") <= 1, values


def test_a_commit_that_timed_out_can_be_retried_and_commits_once(stall: Stall) -> None:
    topic = f"commit-{stall.kind}"
    create_topic(stall.address, topic)
    producer = fast_producer(stall.address, transactional_id=f"commit-{stall.kind}")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"committed-once", partition=0)
        producer.flush()
        stall.stall()
        started_s = time.monotonic()
        with pytest.raises(RequestTimedOutError) as caught:
            producer.commit_transaction(timeout_ms=1_500)
        waited_s = elapsed_s(started_s)
        assert 1.5 * 0.9 <= waited_s < 1.5 + SLACK_S, waited_s
        assert "commit_transaction() did not complete" in str(caught.value)
        stall.resume()
        producer.commit_transaction()  # its outcome was unknown: asking again settles it
    finally:
        stall.resume()
        producer.close(timeout_ms=5_000)
    assert read_all(stall.address, topic, expected=1) == [b"committed-once"]


def test_an_expired_record_makes_its_transaction_abortable_and_it_is_never_read(
    stall: Stall,
) -> None:
    topic = f"abort-{stall.kind}"
    create_topic(stall.address, topic)
    producer = fast_producer(stall.address, transactional_id=f"abort-{stall.kind}")
    other = None
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"aborted-1", partition=0)
        producer.flush()
        stall.stall()
        expiring = producer.send(topic, b"aborted-2", partition=0)
        started_s = time.monotonic()
        with pytest.raises(RequestTimedOutError, match="expired after delivery_timeout_ms"):
            producer.commit_transaction()  # the failed send, raised: abort is the way out
        assert elapsed_s(started_s) < DELIVERY_TIMEOUT_MS / 1000 + SLACK_S
        assert isinstance(expiring.exception(timeout=0), RequestTimedOutError)

        started_s = time.monotonic()
        with pytest.raises(RequestTimedOutError, match="abort_transaction\\(\\) did not complete"):
            producer.abort_transaction()  # default_api_timeout_ms
        assert elapsed_s(started_s) < API_TIMEOUT_MS / 1000 + SLACK_S

        # init_transactions() of another producer is bounded too (another id: it fences no one)
        other = fast_producer(stall.address, transactional_id=f"abort-other-{stall.kind}")
        started_s = time.monotonic()
        with pytest.raises(RequestTimedOutError, match="init_transactions\\(\\) did not complete"):
            other.init_transactions(timeout_ms=1_500)
        assert elapsed_s(started_s) < 1.5 + SLACK_S

        stall.resume()
        producer.abort_transaction()  # again, now answered
        producer.begin_transaction()
        producer.send(topic, b"committed", partition=0)
        producer.commit_transaction()
    finally:
        stall.resume()
        producer.close(timeout_ms=5_000)
        if other is not None:
            other.close(timeout_ms=5_000)
    assert read_all(stall.address, topic, expected=1) == [b"committed"]


def test_poll_position_committed_and_admin_calls_are_bounded(stall: Stall) -> None:
    topic = f"consume-{stall.kind}"
    create_topic(stall.address, topic)
    with fast_producer(stall.address) as producer:
        producer.send(topic, b"one", partition=0).result(timeout=10)
    reading = Consumer(stall.address, group_id=f"g-{stall.kind}", auto_offset_reset="earliest")
    fresh = Consumer(
        stall.address,
        auto_offset_reset="earliest",
        request_timeout_ms=REQUEST_TIMEOUT_MS,
        default_api_timeout_ms=API_TIMEOUT_MS,
    )
    admin = Admin(stall.address, default_api_timeout_ms=2_000)
    try:
        reading.assign([(topic, 0)])
        deadline_s = time.monotonic() + READ_WAIT_S
        seen: list[bytes | None] = []
        while not seen and time.monotonic() < deadline_s:
            seen.extend(record.value for record in reading.poll(200))
        assert seen == [b"one"]
        fresh.assign([(topic, 0)])
        stall.stall()
        for consumer in (reading, fresh, fresh):  # positions known; unknown; lookup pending
            started_s = time.monotonic()
            assert consumer.poll(timeout_ms=1_000) == []
            assert elapsed_s(started_s) < 2.0

        started_s = time.monotonic()
        with pytest.raises(RequestTimedOutError, match="did not complete"):
            fresh.position((topic, 0))
        assert elapsed_s(started_s) < API_TIMEOUT_MS / 1000 + SLACK_S

        started_s = time.monotonic()
        with pytest.raises(RequestTimedOutError, match="list_topics\\(\\) did not complete"):
            admin.list_topics()
        assert elapsed_s(started_s) < 2.0 + SLACK_S

        started_s = time.monotonic()
        reading.close(timeout_ms=1_000)  # its auto-commit waits that long at most
        assert elapsed_s(started_s) < 1.0 + SLACK_S

        stall.resume()
        deadline_s = time.monotonic() + READ_WAIT_S
        while not seen[1:] and time.monotonic() < deadline_s:
            seen.extend(record.value for record in fresh.poll(200))
        assert seen == [b"one", b"one"]  # the fresh consumer, from the start
    finally:
        stall.resume()
        reading.close()
        fresh.close()
        admin.close()
