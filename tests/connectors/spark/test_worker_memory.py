"""A Spark task keeps freed memory in its worker (``worker_memory``): the write task's
batches of a megabyte and the read task's Arrow batches reuse the arenas instead of
faulting fresh pages in. The effect is counted in child processes (the setting is
process-wide), building batches as a write task does; the wiring is checked where the
tasks start."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import pytest

from twinlog.connectors.spark import reader, task_sender, worker_memory

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="glibc's mallopt: Linux only"
)

BUILDS = textwrap.dedent(
    """
    import os, resource, sys
    from twinlog.connectors.spark.worker_memory import keep_freed_memory_in_this_worker
    from twinlog.engine.records.batch_builder import RecordBatchBuilder
    if sys.argv[1] == "keep":
        keep_freed_memory_in_this_worker()
    values = [os.urandom(512).hex().encode() for _ in range(1024)]  # a megabyte's batch
    def build():
        builder = RecordBatchBuilder("zstd", compression_level=1)
        builder.append_many(values, start=0, size_bytes_max=4 << 20)
        assert len(builder.build()) > 256 << 10
    for _ in range(3):  # warm up
        build()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(20):
        build()
    print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    """
)


def _page_faults(mode: str) -> int:
    finished = subprocess.run(
        [sys.executable, "-c", BUILDS, mode], capture_output=True, text=True, timeout=120
    )
    assert finished.returncode == 0, finished.stderr
    return int(finished.stdout.split()[-1])


def test_a_write_tasks_batches_reuse_arena_memory() -> None:
    default = _page_faults("default")
    kept = _page_faults("keep")
    assert default >= 20 * 128, default  # half a megabyte's pages, at least, per batch
    assert kept * 10 < default, (kept, default)


def test_write_and_read_tasks_apply_it(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(
        task_sender, "keep_freed_memory_in_this_worker", lambda: calls.append("write")
    )
    monkeypatch.setattr(reader, "keep_freed_memory_in_this_worker", lambda: calls.append("read"))
    no_broker: Any = None
    with task_sender.TaskSender(no_broker, no_broker, no_broker, "p0-a0-t0", 0):
        pass  # its threads stopped on the way out
    with pytest.raises(AttributeError):  # no settings: the task fails right after it
        list(reader.read_range(no_broker, no_broker, _a_range()))
    assert calls == ["write", "read"]


def _a_range() -> Any:
    from twinlog.connectors.spark.ranges import OffsetRange

    return OffsetRange("t", 0, 0, 1)


def test_applied_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    applied: list[int] = []
    monkeypatch.setattr(worker_memory, "keep_freed_memory", lambda: applied.append(1) or "")
    monkeypatch.setattr(worker_memory, "_applied", type(worker_memory._applied)())
    for _ in range(3):
        worker_memory.keep_freed_memory_in_this_worker()
    assert applied == [1]
