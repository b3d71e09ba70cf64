"""More producers than the server has threads for streams: nobody starves.

Each open ProduceStream holds one of the server's worker threads. Before the
limit (``produce_streams_max``), as many producers as ``worker_threads`` took
every thread and every other call (begin, commit, fetch, list topics) waited
forever. Now streams past the limit are refused and those producers send unary
Produce calls; every record arrives, and the server answers other calls at once.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from server_process import ServerProcess

from twinlog.rpc.client import Admin, Consumer, Producer
from twinlog.rpc.client.remote import RemoteBroker

pytestmark = [pytest.mark.slow]

WORKER_THREADS = 8
STREAMS_MAX = 3
PRODUCERS = 10  # more than the server's worker threads


@pytest.fixture()
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with ServerProcess(
        tmp_path / "data",
        "--config",
        f"worker_threads={WORKER_THREADS}",
        "--config",
        f"produce_streams_max={STREAMS_MAX}",
    ) as process:
        yield process
        assert process.stop() == 0, process.log()[-5000:]


def test_producers_beyond_the_stream_limit_fall_back_to_unary_calls(
    server: ServerProcess,
) -> None:
    with Admin(server.address) as admin:
        admin.create_topic("many", partitions=2)
    producers = [
        Producer(server.address, transactional_id=f"p{n}", linger_ms=0) for n in range(PRODUCERS)
    ]
    try:
        for number, producer in enumerate(producers):
            producer.init_transactions()
            producer.begin_transaction()
            producer.send("many", f"first-{number}".encode(), partition=number % 2)
            producer.flush()  # every producer now holds a stream, or was refused one
        with RemoteBroker(server.address) as remote:  # while the streams are open
            started = time.monotonic()
            assert remote.list_topics() == ["many"]
            assert time.monotonic() - started < 2.0
        for number, producer in enumerate(producers):
            producer.send("many", f"second-{number}".encode(), partition=number % 2)
            producer.commit_transaction()
    finally:
        for producer in producers:
            producer.close(timeout_ms=5_000)
    with Consumer(server.address) as consumer:
        consumer.assign([("many", 0), ("many", 1)])
        consumer.seek_to_beginning()
        values: list[bytes] = []
        deadline = time.monotonic() + 15
        while len(values) < 2 * PRODUCERS and time.monotonic() < deadline:
            values.extend(r.value or b"" for r in consumer.poll(timeout_ms=200))
    expected = {f"{kind}-{n}".encode() for kind in ("first", "second") for n in range(PRODUCERS)}
    assert sorted(values) == sorted(expected)
    assert "produce streams are open" in server.log()  # the fallback was taken
