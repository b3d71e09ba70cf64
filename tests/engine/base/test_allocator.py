"""``keep_freed_memory``: with it, transactions and large fetches stop faulting fresh
pages in.

Each side runs in its own process (the setting is process-wide and cannot be
undone), counting the minor page faults its work causes:

* 20 transactions of 4 x 250 x 1 KiB through an embedded broker. The gap measured
  when this was written: ≈ 20,000 without, ≈ 1,600 with.
* 20 fetches of 8 MiB (the Spark reader's size): with blocks over 4 MiB mapped on
  their own (the thresholds before), each fetch faulted in its 2,048 pages; with
  them kept in the arena, a few.
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

WORKLOAD = textwrap.dedent(
    """
    import os, resource, sys, tempfile
    from pathlib import Path
    if sys.argv[1] == "keep":
        from twinlog.engine.base.allocator import keep_freed_memory
        keep_freed_memory()
    from twinlog.engine.broker.broker import Broker
    from twinlog.rpc.client import Producer

    values = [os.urandom(1024) for _ in range(250)]
    with tempfile.TemporaryDirectory() as directory, Broker.open(Path(directory)) as broker:
        broker.create_topic("t", 4)
        producer = Producer(broker, transactional_id="faults", compression="none",
                            linger_ms=1000, batch_bytes=1 << 20)
        producer.init_transactions()
        def transaction():
            producer.begin_transaction()
            for partition in range(4):
                producer.send_batch("t", partition, values)
            producer.commit_transaction()
        for _ in range(5):  # warm up: imports, first segments, LMDB's map
            transaction()
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(20):
            transaction()
        print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
        producer.close()
    """
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


def _page_faults(mode: str, workload: str = WORKLOAD) -> int:
    finished = subprocess.run(
        [sys.executable, "-c", workload, mode],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return int(finished.stdout.split()[-1])


def test_transactions_fault_far_fewer_pages_in_with_freed_memory_kept() -> None:
    default = _page_faults("default")
    kept = _page_faults("keep")
    assert kept * 3 < default, (kept, default)


def test_large_fetches_reuse_arena_memory_instead_of_fresh_mappings() -> None:
    before = _page_faults("before", FETCHES)
    kept = _page_faults("keep", FETCHES)
    assert before >= 20 * 1024, before  # at least half of each fetch's pages faulted in
    assert kept * 10 < before, (kept, before)


def test_says_what_it_set() -> None:
    said = keep_freed_memory()
    assert said == "malloc: keeps 64 MiB free per arena, maps blocks over 32 MiB", said
