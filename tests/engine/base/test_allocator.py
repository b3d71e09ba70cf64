"""``keep_freed_memory``: with it, large fetches stop faulting fresh pages in.

Each side runs in its own process (the setting is process-wide and cannot be undone),
counting the minor page faults of 20 fetches of 8 MiB (the Spark reader's size) from an
embedded broker. With blocks over 4 MiB mapped on their own (the thresholds before),
each fetch faulted in its 2,048 pages; with them kept in the arena, none.

Transactions through an embedded broker no longer show the setting reliably: once the
journal stopped copying each batch, 20 transactions of 4 x 250 x 1 KiB faulted
1,616-3,378 pages without it and 1,455-1,707 with it (glibc's own adaptive threshold
covers the rest). The server's gRPC buffers still do: 211-250 page faults per
transaction without it, 16-17 with it (docs/operations.md).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from twinlog.engine.base.allocator import keep_freed_memory

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="glibc's mallopt: Linux only"
)

FETCHES = textwrap.dedent(
    """
    import resource, sys, tempfile
    from pathlib import Path
    from twinlog.engine.base.allocator import keep_freed_memory
    if sys.argv[1] == "keep":
        keep_freed_memory()
    else:  # the thresholds before: 16 MiB kept, blocks over 4 MiB mapped on their own
        keep_freed_memory(trim_threshold_bytes=16 << 20, mmap_threshold_bytes=4 << 20)
    from twinlog.engine.broker.broker import Broker
    from twinlog.engine.records.batch_builder import RecordBatchBuilder

    fetch_bytes = 8 << 20
    with tempfile.TemporaryDirectory() as directory, Broker.open(Path(directory)) as broker:
        broker.create_topic("t", 1)
        for _ in range(12):  # 12 MiB: every fetch below is a full 8 MiB
            builder = RecordBatchBuilder(compression="none")
            for _ in range(1024):
                builder.append_value(bytes(1024), 0)
            broker.produce("t", 0, builder.build())
        def fetch():
            records = broker.fetch("t", 0, 0, max_bytes=fetch_bytes).records
            assert len(records) > fetch_bytes // 2, len(records)
        for _ in range(3):  # warm up
            fetch()
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(20):
            fetch()
        print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    """
)


def _page_faults(mode: str, workload: str) -> int:
    finished = subprocess.run(
        [sys.executable, "-c", workload, mode],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return int(finished.stdout.split()[-1])


def test_large_fetches_reuse_arena_memory_instead_of_fresh_mappings() -> None:
    before = _page_faults("before", FETCHES)
    kept = _page_faults("keep", FETCHES)
    assert before >= 20 * 1024, before  # at least half of each fetch's pages faulted in
    assert kept * 10 < before, (kept, before)


def test_says_what_it_set() -> None:
    said = keep_freed_memory()
    assert said == "malloc: keeps 64 MiB free per arena, maps blocks over 32 MiB", said
