"""What writing new file data costs this machine, step by step: is fresh page cache cheap?

    python -m bench.page_cache_writes                       # 3 GiB in steps of 512 MiB
    python -m bench.page_cache_writes --total-mib 1024 --step-mib 256 --dir /data

Writes new files of ``--step-mib`` each (512 KiB ``pwrite`` calls of the same few
buffers, no fsync) until ``--total-mib`` are written, keeping them until the end so
that every step needs page cache the ones before did not free; then deletes them.
Prints, per step, the write rate and the CPU time the calling thread spent per GiB.

Why it exists: on a virtual machine whose host takes freed guest memory back (a
balloon driver reporting free pages), a page the guest has not touched lately costs a
fault in the *host* on first touch, which the guest sees as a slow copy into the page
cache. On the machine the project's figures come from, the first ~1.5 GiB of new file
data went in at 3.2-4.3 GB/s and the rest at ~400 MB/s, ten times the CPU per byte
(``perf`` put it in ``copy_folio_from_iter_atomic`` under ``pwritev``). A Spark write of
1,000,000 x 1 KiB rows writes ~1 GiB twice over (the local journal, then the data log):
there, 31 % of the server's CPU was that copy. Run this before reading a large
benchmark's figures on a new machine: if the late steps are slow, every large write
pays it, twinlog's and Parquet's alike.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from twinlog.engine.base.units import MEBIBYTE

WRITE_BYTES = 512 * 1024  # one pwrite
BUFFERS = 8  # distinct source buffers, reused: the source stays in the CPU's caches


@dataclass(frozen=True)
class Step:
    written_mib: int  # total written once this step ended
    megabytes_per_s: float
    cpu_s_per_gib: float


def measure(directory: Path, total_mib: int, step_mib: int) -> list[Step]:
    """Write ``total_mib`` of new files, ``step_mib`` per file, and time each file."""
    if step_mib < 1 or total_mib < step_mib:
        raise ValueError(f"need 1 <= step_mib <= total_mib, got {step_mib} and {total_mib}")
    buffers = [os.urandom(WRITE_BYTES) for _ in range(BUFFERS)]
    writes_per_step = step_mib * MEBIBYTE // WRITE_BYTES
    paths: list[Path] = []
    steps: list[Step] = []
    try:
        for index in range(total_mib // step_mib):
            path = directory / f"page-cache-{index}.bin"
            paths.append(path)
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                started_s, started_cpu_s = time.perf_counter(), time.thread_time()
                for write in range(writes_per_step):
                    os.pwrite(descriptor, buffers[write % BUFFERS], write * WRITE_BYTES)
                elapsed_s = time.perf_counter() - started_s
                cpu_s = time.thread_time() - started_cpu_s
            finally:
                os.close(descriptor)
            steps.append(
                Step(
                    written_mib=(index + 1) * step_mib,
                    megabytes_per_s=step_mib * MEBIBYTE / 1e6 / max(elapsed_s, 1e-9),
                    cpu_s_per_gib=cpu_s * 1024 / step_mib,
                )
            )
    finally:
        for path in paths:
            path.unlink(missing_ok=True)
    return steps


def report(steps: list[Step]) -> str:
    lines = [f"{'written MiB':>12}{'MB/s':>10}{'CPU s per GiB':>15}"]
    for step in steps:
        lines.append(
            f"{step.written_mib:>12,}{step.megabytes_per_s:>10,.0f}{step.cpu_s_per_gib:>15.2f}"
        )
    fastest = max(step.megabytes_per_s for step in steps)
    slowest = min(step.megabytes_per_s for step in steps)
    lines.append(f"slowest step at {slowest / fastest:.2f}x the fastest")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="example: python -m bench.page_cache_writes --total-mib 1024 --step-mib 256",
    )
    parser.add_argument("--total-mib", type=int, default=3072, help="new file data in all")
    parser.add_argument("--step-mib", type=int, default=512, help="one file, timed alone")
    parser.add_argument("--dir", help="where the files go (default: the system's temp dir)")
    arguments = parser.parse_args(argv)
    if not 1 <= arguments.step_mib <= arguments.total_mib:
        parser.error("need 1 <= --step-mib <= --total-mib")
    with tempfile.TemporaryDirectory(dir=arguments.dir) as directory:
        print(report(measure(Path(directory), arguments.total_mib, arguments.step_mib)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
