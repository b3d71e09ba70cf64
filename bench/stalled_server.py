"""How long each client call takes against a server paused with SIGSTOP (a GC pause, a
hung disk, a partition that drops packets): the issue's stalls, timed.

    python bench/stalled_server.py

A fresh ``twinlog serve``; one record delivered; then SIGSTOP and, in turn: a record's
future, ``flush()``, ``poll(timeout_ms=2000)``, ``close()``, ``Consumer.close()`` and a
transactional producer's ``init_transactions()``, with delivery_timeout_ms=5000,
request_timeout_ms=4000 and default_api_timeout_ms=5000. Each line says what the call
returned or raised, and after how long. The tests (tests/system/test_stalled_server.py)
assert the bounds; this prints them.
"""

from __future__ import annotations

import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))

from server_process import ServerProcess

from twinlog.engine.base.errors import TwinlogError
from twinlog.rpc.client import Admin, Consumer, Producer

REQUEST_TIMEOUT_MS = 4_000
DEFAULT_API_TIMEOUT_MS = 5_000


def timed(name: str, call: Callable[[], object]) -> None:
    started_s = time.monotonic()
    try:
        outcome = f"returned {call()!r}"[:48]
    except (TwinlogError, TimeoutError) as error:
        outcome = f"raised {type(error).__name__}"
    print(f"{name:<28} {outcome:<48} after {time.monotonic() - started_s:5.2f} s")


def main() -> int:
    with tempfile.TemporaryDirectory() as work_dir:
        server = ServerProcess(Path(work_dir) / "data").start()
        assert server.process is not None
        try:
            with Admin(server.address) as admin:
                admin.create_topic("stalled", 1)
            producer = Producer(
                server.address,
                delivery_timeout_ms=5_000,
                request_timeout_ms=REQUEST_TIMEOUT_MS,
                default_api_timeout_ms=DEFAULT_API_TIMEOUT_MS,
            )
            producer.send("stalled", b"delivered").result(timeout=10)
            consumer = Consumer(
                server.address,
                auto_offset_reset="earliest",
                request_timeout_ms=REQUEST_TIMEOUT_MS,
                default_api_timeout_ms=DEFAULT_API_TIMEOUT_MS,
            )
            consumer.assign([("stalled", 0)])
            server.process.send_signal(signal.SIGSTOP)
            future = producer.send("stalled", b"never answered")
            timed("send().result(timeout=40)", lambda: future.result(timeout=40))
            timed("flush()", producer.flush)
            timed("poll(timeout_ms=2000)", lambda: consumer.poll(timeout_ms=2_000))
            timed("close()", producer.close)
            timed("Consumer.close()", consumer.close)
            transactional = Producer(
                server.address,
                transactional_id="stalled",
                request_timeout_ms=REQUEST_TIMEOUT_MS,
                default_api_timeout_ms=DEFAULT_API_TIMEOUT_MS,
            )
            timed("init_transactions()", transactional.init_transactions)
            transactional.close(timeout_ms=0)
        finally:
            server.process.send_signal(signal.SIGCONT)
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
