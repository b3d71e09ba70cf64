"""How long a broker takes to open after a crash, against the length of its log.

    python -m bench.restart_time                    # 256 MiB and 1 GiB, 16 KiB batches
    python -m bench.restart_time --log-mib 64,256 --batch-kib 4

For each log length: a child process opens a broker, writes that much to one partition
as an idempotent producer (batches of ``--batch-kib`` KiB of 1 KiB records, the way a
producer's batching sends them) and dies without closing (``os._exit``: the page cache
keeps what it wrote, as after a SIGKILL; no clean-shutdown snapshot). Then this process
opens the broker and prints the open's wall time, the part of it spent rebuilding the
producers' state (the idempotence table, ``Partition._load_sequences``: a snapshot plus
a scan of the log after it), and the same for an open after a clean close. A
measurement, not a test: nothing fails because a machine is slow.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker import partition as partition_module
from twinlog.engine.broker.broker import Broker
from twinlog.engine.broker.producer_state import SequenceTracker

TOPIC = "restart"
RECORD_BYTES = 1024


def write_and_die(directory: Path, log_mib: int, batch_kib: int) -> None:
    """The child: ``log_mib`` MiB of idempotent batches into partition 0, then exit
    without closing anything."""
    from twinlog.engine.records.batch_builder import RecordBatchBuilder

    records_per_batch = max(1, batch_kib * 1024 // RECORD_BYTES)
    value = os.urandom(RECORD_BYTES)
    broker = Broker.open(directory)
    broker.create_topic(TOPIC, 1)
    written = sequence = 0
    producer_id, generation = 1000, 0
    while written < log_mib << 20:
        builder = RecordBatchBuilder(
            "none",
            producer_id=producer_id,
            producer_generation=generation,
            base_sequence=sequence,
        )
        for _ in range(records_per_batch):
            builder.append(value, timestamp_ms=1_700_000_000_000)
        batch = builder.build()
        broker.produce(TOPIC, 0, batch)
        written += len(batch)
        sequence += records_per_batch
    broker.partition(TopicPartition(TOPIC, 0)).log.flush()
    os._exit(0)  # a crash: nothing closed, nothing snapshotted on the way out


def timed_open(directory: Path) -> tuple[float, float]:
    """(seconds to open the broker, seconds of them rebuilding producer state)."""
    rebuilding = [0.0]
    original = partition_module.Partition._load_sequences

    def timed(self: partition_module.Partition) -> SequenceTracker:
        started = time.perf_counter()
        try:
            return original(self)
        finally:
            rebuilding[0] += time.perf_counter() - started

    partition_module.Partition._load_sequences = timed  # type: ignore[method-assign]
    try:
        started = time.perf_counter()
        broker = Broker.open(directory)
        opened_s = time.perf_counter() - started
    finally:
        partition_module.Partition._load_sequences = original  # type: ignore[method-assign]
    broker.close()
    return opened_s, rebuilding[0]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--log-mib", default="256,1024", help="log lengths, MiB, comma-separated")
    parser.add_argument("--batch-kib", type=int, default=16, help="producer batch size, KiB")
    parser.add_argument("--dir", type=Path, default=None, help="default: a temporary one")
    parser.add_argument("--child", nargs=3, metavar=("DIR", "MIB", "KIB"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        write_and_die(Path(args.child[0]), int(args.child[1]), int(args.child[2]))
    lengths = [int(part) for part in args.log_mib.split(",") if part]
    if not lengths or min(lengths) < 1 or args.batch_kib < 1:
        parser.error("--log-mib needs lengths of 1 MiB or more; --batch-kib 1 or more")
    for log_mib in lengths:
        with tempfile.TemporaryDirectory(dir=args.dir) as root:
            directory = Path(root) / "data"
            started = time.perf_counter()
            child = ["--child", str(directory), str(log_mib), str(args.batch_kib)]
            subprocess.run(
                [sys.executable, "-m", "bench.restart_time", *child],
                check=True,
                timeout=3600,
            )
            wrote_s = time.perf_counter() - started
            crashed = timed_open(directory)  # the open after the crash, then a clean close
            clean = timed_open(directory)
            print(
                f"{log_mib:>6} MiB log in {args.batch_kib} KiB batches (written in {wrote_s:.0f} s): "
                f"open after a crash {crashed[0]:.2f} s (producer state {crashed[1]:.2f} s), "
                f"after a clean close {clean[0]:.2f} s (producer state {clean[1]:.2f} s)"
            )


if __name__ == "__main__":
    main()
