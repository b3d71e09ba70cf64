"""What hostile requests cost a real server process: peak RSS (VmHWM) and how long another
client's transaction waits. Each case runs against a fresh ``twinlog serve``:

    python bench/request_cost.py            # all cases
    python bench/request_cost.py bomb       # one of: bomb, near-cap, records, long-polls

bomb        8 clients at once each send an 8 KiB zstd batch declaring 256 MiB of zeros to
            a compacted topic
near-cap    8 at once, each declaring just under batch_decompressed_bytes_max (32 MiB)
records     a ~1 KiB batch of 2,000,000 empty records
long-polls  130 idle long polls (30 s) from as many connections, then another client's
            init + begin + produce + commit
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from pathlib import Path

import zstandard

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))

from batch_support import batch_around
from server_process import ServerProcess

from twinlog.engine.base.errors import TwinlogError
from twinlog.engine.base.units import MEBIBYTE
from twinlog.engine.records.batch_builder import RecordBatchBuilder, encode_record
from twinlog.rpc.client.remote import RemoteBroker


def peak_rss_mib(server: ServerProcess) -> float:
    assert server.process is not None
    for line in Path(f"/proc/{server.process.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def zeros_bomb(size_bytes: int) -> bytes:
    compressor = zstandard.ZstdCompressor(level=19, write_content_size=True)
    return batch_around(
        compressor.compress(bytes(size_bytes)), 1, codec=4, section_is_compressed=True
    )


def at_once(count: int, address: str, send: object) -> list[str]:
    outcomes: list[str] = []
    barrier = threading.Barrier(count)

    def run() -> None:
        with RemoteBroker(address) as remote:
            barrier.wait()
            began = time.monotonic()
            try:
                send(remote)  # type: ignore[operator]
                outcomes.append(f"ok {time.monotonic() - began:.2f}s")
            except TwinlogError as error:
                outcomes.append(f"{type(error).__name__} {time.monotonic() - began:.2f}s")

    threads = [threading.Thread(target=run) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def bombs(server: ServerProcess, size_bytes: int) -> str:
    with RemoteBroker(server.address) as remote:
        remote.create_topic("latest", 1, config={"cleanup.policy": "compact"})
    bomb = zeros_bomb(size_bytes)
    outcomes = at_once(8, server.address, lambda r: r.produce("latest", 0, bomb))
    return f"{len(bomb)}-byte batches declaring {size_bytes} bytes, 8 at once: {sorted(outcomes)}"


def many_records(server: ServerProcess) -> str:
    with RemoteBroker(server.address) as remote:
        remote.create_topic("tiny", 1)
        builder_section = b"".join(
            encode_record(delta, 0, None, b"", None) for delta in range(2_000_000)
        )
        section = zstandard.ZstdCompressor(level=19).compress(builder_section)
        batch = batch_around(section, 2_000_000, codec=4, section_is_compressed=True)
        began = time.monotonic()
        try:
            remote.produce("tiny", 0, batch)
            outcome = "accepted"
        except TwinlogError as error:
            outcome = f"{type(error).__name__}: {error}"
        return f"{len(batch)}-byte batch of 2,000,000 records: {outcome} ({time.monotonic() - began:.2f}s)"


def long_polls(server: ServerProcess) -> str:
    with RemoteBroker(server.address) as remote:
        remote.create_topic("idle", 1)
        remote.create_topic("orders", 1)
    stop = threading.Event()
    outcomes: list[str] = []

    def idle() -> None:
        with RemoteBroker(server.address) as remote:
            try:
                remote.fetch("idle", 0, 0, max_wait_ms=30_000)
                outcomes.append("waited")
            except TwinlogError as error:
                outcomes.append(type(error).__name__)

    pollers = [threading.Thread(target=idle, daemon=True) for _ in range(130)]
    for poller in pollers:
        poller.start()
    time.sleep(2.0)
    with RemoteBroker(server.address) as remote:
        began = time.monotonic()
        identity = remote.init_producer("other-client")
        producer = (identity.producer_id, identity.producer_generation)
        transaction_id = remote.begin_transaction(*producer)
        remote.add_partitions_to_transaction(transaction_id, *producer, [("orders", 0)])  # type: ignore[list-item]
        builder = RecordBatchBuilder(
            producer_id=producer[0],
            producer_generation=producer[1],
            base_sequence=0,
            transactional=True,
        )
        builder.append(b"paid")
        remote.produce("orders", 0, builder.build(), transaction_id=transaction_id)
        remote.commit_transaction(transaction_id, *producer, wait_for_applied=True)
        waited_s = time.monotonic() - began
    stop.set()
    counts = {what: outcomes.count(what) for what in set(outcomes)}
    return f"130 idle long polls: the other client's transaction took {waited_s:.2f}s; polls so far {counts}"


CASES = {
    "bomb": lambda server: bombs(server, 256 * MEBIBYTE),
    "near-cap": lambda server: bombs(server, 32 * MEBIBYTE - 4096),
    "records": many_records,
    "long-polls": long_polls,
}


def main(names: list[str]) -> None:
    for name in names or list(CASES):
        with tempfile.TemporaryDirectory() as directory:
            server = ServerProcess(Path(directory) / "data").start()
            try:
                baseline = peak_rss_mib(server)
                line = CASES[name](server)
                print(
                    f"{name}: {line}; server VmHWM {baseline:.0f} -> {peak_rss_mib(server):.0f} MiB"
                )
            finally:
                server.kill()


if __name__ == "__main__":
    main(sys.argv[1:])
