"""Bounded memory: a 1 GiB transaction (1024 batches of 1 MiB) is applied with flat memory.

The journal is filled here (the batches in the partition's journal log, LMDB naming
them); the apply runs in a fresh process, which reports its resident set before the
apply (VmRSS), its high-water mark after (VmHWM), and the largest anonymous
and file-backed parts seen by a sampler thread. The growth must stay under
64 MiB although 1 GiB is read from the journal log: the copier streams one batch
at a time. (Entries kept inline in LMDB, as older journals hold them, are streamed as
zero-copy views, the map's pages released every ``read_chunk_bytes``.)

The child keeps freed memory as ``twinlog serve`` does (``keep_freed_memory``).

Run alone to see the figures: ``pytest tests/test_copier_memory.py -s``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

if __name__ == "__main__":  # run as a script, the measured child: find the test helpers
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

from checkout import ROOT
from copier_support import PartitionFixture, transactional_batch

TRANSACTION = 7
BATCH_COUNT = 1024
BATCH_BYTES = 1 << 20
GROWTH_LIMIT_BYTES = 64 << 20


def _status_bytes(*fields: str) -> dict[str, int]:
    found = {}
    with open("/proc/self/status") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in fields:
                found[name] = int(value.split()[0]) * 1024
    return found


def _measure_apply(data_dir: str) -> dict[str, float]:
    """The child: open, apply, report memory figures as JSON."""
    partition = PartitionFixture(Path(data_dir))
    before = _status_bytes("VmRSS", "RssAnon", "RssFile")
    peaks = {"RssAnon": 0, "RssFile": 0}
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            for name, value in _status_bytes("RssAnon", "RssFile").items():
                peaks[name] = max(peaks[name], value)
            time.sleep(0.005)

    sampler = threading.Thread(target=sample)
    sampler.start()
    started = time.monotonic()
    first, next_offset = partition.writer.apply_commit(TRANSACTION)
    elapsed_s = time.monotonic() - started
    done.set()
    sampler.join()
    after = _status_bytes("VmHWM")
    partition.close()
    return {
        "records": next_offset - first,
        "elapsed_s": elapsed_s,
        "rss_before": before["VmRSS"],
        "hwm_after": after["VmHWM"],
        "anon_growth_peak": peaks["RssAnon"] - before["RssAnon"],
        "file_growth_peak": peaks["RssFile"] - before["RssFile"],
    }


@pytest.mark.slow
def test_one_gibibyte_transaction_applies_with_flat_memory(tmp_path: Path) -> None:
    batch = transactional_batch(TRANSACTION, 0, record_count=1, value_bytes=BATCH_BYTES - 200)
    partition = PartitionFixture(tmp_path)
    fill_started = time.monotonic()
    threads = [
        threading.Thread(
            target=lambda: [
                partition.j.append(partition.name, TRANSACTION, batch)
                for _ in range(BATCH_COUNT // 8)
            ]
        )
        for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    fill_s = time.monotonic() - fill_started
    stats = partition.j.statistics()
    assert stats.pending_by_partition[partition.name] == (BATCH_COUNT, BATCH_COUNT * len(batch))
    # LMDB names the batches in the journal log and holds none of their bytes: its map
    # never grows past its first 256 MiB (it grew to 2 GiB when it kept them).
    assert stats.map_resizes == 0 and stats.size_bytes < 16 << 20, stats
    partition.close()

    completed = subprocess.run(
        [sys.executable, __file__, str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr
    figures = json.loads(completed.stdout.strip().splitlines()[-1])
    growth = figures["hwm_after"] - figures["rss_before"]
    print(
        f"\n1 GiB apply: fill {fill_s:.1f} s, apply {figures['elapsed_s']:.1f} s, VmRSS before "
        f"{figures['rss_before'] >> 20} MiB, VmHWM after {figures['hwm_after'] >> 20} MiB, growth "
        f"{growth / (1 << 20):.1f} MiB (anon peak +{figures['anon_growth_peak'] / (1 << 20):.1f} MiB, "
        f"file-backed peak +{figures['file_growth_peak'] / (1 << 20):.1f} MiB)"
    )
    assert figures["records"] == BATCH_COUNT
    assert growth < GROWTH_LIMIT_BYTES, figures

    reopened = PartitionFixture(tmp_path)
    try:
        assert reopened.log.log_end_offset == BATCH_COUNT
        assert reopened.log.size_bytes() >= BATCH_COUNT * len(batch)
        assert reopened.j.statistics().entry_count == 0
    finally:
        reopened.close()


if __name__ == "__main__":
    from twinlog.engine.base.allocator import keep_freed_memory

    keep_freed_memory()  # as twinlog serve runs: freed memory kept, up to 64 MiB per arena
    print(json.dumps(_measure_apply(sys.argv[1])))
