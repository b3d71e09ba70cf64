"""Compaction interrupted at every step (failpoints, real SIGKILLs), then the log reopened.

After any interruption the reopened log is the old segments or the new one, never
a mix that misses a record: every key's latest value is the one written last,
batch offsets are contiguous, and no temporary file of the compaction is left.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from log_support import flip_bit, headers_of, read_all, segment_files
from test_log_compaction import NOW_MS, check_contiguous, compacted, fill, latest_by_key

from twinlog.engine.base import failpoints
from twinlog.engine.base.errors import CorruptLogError
from twinlog.engine.base.failpoints import ENVIRONMENT_VARIABLE, FailpointError
from twinlog.engine.log import DataLog, compact
from twinlog.engine.log.files import index_path
from twinlog.engine.records.batch_reader import iter_batches

BEFORE_COMMIT = ["compaction.after_cleaned_batch", "compaction.after_write_cleaned"]
AFTER_COMMIT = [
    "compaction.after_commit",
    "compaction.after_delete_replaced",
    "compaction.before_rename_segment",
    "compaction.after_swap",
]


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith((".cleaned", ".swap")))


def prepared(tmp_path: Path) -> tuple[Path, dict[bytes, bytes], bytes, bytes]:
    """A closed log to compact, its latest values, its bytes, and its bytes once the first
    segment group is compacted (where an interrupted compaction stops)."""
    directory = tmp_path / "log"
    with DataLog.open(directory, compacted()) as log:
        model = fill(log, 60)
        old = read_all(log)
    reference = tmp_path / "reference"
    shutil.copytree(directory, reference)
    with DataLog.open(reference, compacted()) as log:
        failpoints.arm("compaction.after_swap", "raise")  # stop once the first group is in
        try:
            with pytest.raises(FailpointError):
                compact(log, NOW_MS)
        finally:
            failpoints.disarm_all()
    first_group = segment_files(reference)[0].read_bytes()
    end_offset = headers_of(first_group)[-1].next_offset
    new = first_group + b"".join(
        bytes(batch.buffer) for batch in iter_batches(old) if batch.header.base_offset >= end_offset
    )
    assert new != old
    return directory, model, old, new


@pytest.mark.parametrize("point", BEFORE_COMMIT + AFTER_COMMIT)
@pytest.mark.usefixtures("disarmed")
def test_failure_at_each_step_leaves_old_or_new_after_reopen(tmp_path: Path, point: str) -> None:
    directory, model, old, new = prepared(tmp_path)
    log = DataLog.open(directory, compacted())
    failpoints.arm(point, "raise")
    with pytest.raises(FailpointError):
        compact(log, NOW_MS)
    failpoints.disarm_all()
    # Until reopened, the log serves what it served: the old segments, by descriptor.
    assert read_all(log) == old and latest_by_key(log) == model
    if point in AFTER_COMMIT:
        assert "reopen the log" in compact(log, NOW_MS).skipped
    else:
        assert leftovers(directory) == []  # an uncommitted attempt cleans up after itself
    log.close()
    with DataLog.open(directory, compacted()) as reopened:
        assert read_all(reopened) == (new if point in AFTER_COMMIT else old)
        assert latest_by_key(reopened) == model
        # after_swap: every file was in place already, recovery had nothing to finish
        finished = point in AFTER_COMMIT and point != "compaction.after_swap"
        assert bool(reopened.recovery_report.compaction_finished) == finished
        check_contiguous(reopened)
        assert leftovers(directory) == []
        if point in BEFORE_COMMIT:  # and compaction simply works the next time
            assert compact(reopened, NOW_MS).segments_replaced > 0
            assert latest_by_key(reopened) == model
            check_contiguous(reopened)


def test_uncommitted_files_are_deleted_on_open(tmp_path: Path) -> None:
    directory, model, old, _ = prepared(tmp_path)
    first = segment_files(directory)[0]
    for name in ("log", "index", "timeindex"):  # as a crash in step 1 or 2 leaves them
        (directory / f"{first.stem}.{name}.cleaned").write_bytes(b"half written")
    (directory / f"{first.stem}.index.swap").write_bytes(b"")
    with DataLog.open(directory, compacted()) as log:
        assert len(log.recovery_report.compaction_finished) == 4
        assert read_all(log) == old and latest_by_key(log) == model
        assert leftovers(directory) == []


def _fail_just_after_the_commit_point(directory: Path) -> None:
    """Compact, failing right after the ``.swap`` rename (the commit point), and close."""
    log = DataLog.open(directory, compacted())
    failpoints.arm("compaction.after_commit", "raise")
    try:
        with pytest.raises(FailpointError):
            compact(log, NOW_MS)
    finally:
        failpoints.disarm_all()
    log.close()


def test_a_committed_swap_without_its_indexes_gets_rebuilt_ones(tmp_path: Path) -> None:
    directory, model, _, new = prepared(tmp_path)
    _fail_just_after_the_commit_point(directory)
    first = segment_files(directory)[0].stem
    for name in ("index", "timeindex"):  # a directory that lost these renames
        (directory / f"{first}.{name}.swap").unlink()
    with DataLog.open(directory, compacted()) as reopened:
        assert str(directory / f"{first}.log") in reopened.recovery_report.indexes_rebuilt
        assert read_all(reopened) == new and latest_by_key(reopened) == model
        check_contiguous(reopened)
    assert index_path(directory, int(first)).exists()


def test_a_damaged_committed_swap_is_refused_and_nothing_changes(tmp_path: Path) -> None:
    directory, _, _, _ = prepared(tmp_path)
    _fail_just_after_the_commit_point(directory)
    swap = next(directory.glob("*.log.swap"))
    flip_bit(swap, 40)
    names = sorted(p.name for p in directory.iterdir())
    with pytest.raises(CorruptLogError, match=r"committed compaction .* damaged"):
        DataLog.open(directory, compacted())
    assert sorted(p.name for p in directory.iterdir()) == names


# --- real SIGKILLs -----------------------------------------------------------------------

COMPACTOR = textwrap.dedent(
    """
    import sys
    from twinlog.engine.records.batch_builder import RecordBatchBuilder
    from twinlog.engine.log import DataLog, LogConfig, compact

    directory, mode = sys.argv[1:3]
    config = LogConfig(segment_bytes=3000, index_interval_bytes=256, cleanup_policy="compact",
                       min_cleanable_dirty_ratio=0.0)
    log = DataLog.open(directory, config)

    def write(number):
        key = f"key{number % 23}".encode()
        value = None if number % 13 == 5 else f"{number}:".encode().ljust(60, b"v")
        builder = RecordBatchBuilder("zstd" if number % 3 else "none")
        builder.append(value, key=key, timestamp_ms=1_700_000_000_000)
        return log.append_as_leader(builder.build())

    if mode == "compact":  # the failpoint in the environment kills it in the compaction
        for number in range(log.log_end_offset, log.log_end_offset + 100):  # surely dirty
            write(number)
        compact(log, 1_700_000_001_000)
        print("compacted", flush=True)
    else:  # "loop": write and compact until killed; print each acknowledged write
        for number in range(log.log_end_offset, 10**9):
            assert write(number) == number
            print(number, flush=True)
            if number % 40 == 39:
                compact(log, 1_700_000_001_000)
    """
)


def expected_latest(write_count: int) -> dict[bytes, bytes | None]:
    """What the COMPACTOR's first ``write_count`` writes leave as each key's latest."""
    latest: dict[bytes, bytes | None] = {}
    for number in range(write_count):
        value = None if number % 13 == 5 else f"{number}:".encode().ljust(60, b"v")
        latest[f"key{number % 23}".encode()] = value
    return latest


def run_compactor(directory: Path, mode: str, failpoint: str = "") -> subprocess.Popen[str]:
    environment = dict(os.environ)
    environment.pop(ENVIRONMENT_VARIABLE, None)
    if failpoint:
        environment[ENVIRONMENT_VARIABLE] = failpoint
    return subprocess.Popen(
        [sys.executable, "-c", COMPACTOR, str(directory), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
    )


def reopen_and_check(directory: Path, minimum_writes: int) -> int:
    with DataLog.open(directory, compacted(segment_bytes=3000, index_interval_bytes=256)) as log:
        writes = log.log_end_offset  # one record per write: the log says how many landed
        assert writes >= minimum_writes
        assert latest_by_key(log) == expected_latest(writes)
        check_contiguous(log)
        assert leftovers(directory) == []
        return writes


def fill_for_compactor(directory: Path) -> int:
    """Writes (via the loop mode, killed once it acknowledged enough) for a compaction."""
    writer = run_compactor(directory, "loop")
    assert writer.stdout is not None
    for line in writer.stdout:
        if int(line) >= 300:
            break
    writer.kill()
    writer.communicate(timeout=60)  # reaps it and closes its pipes
    return reopen_and_check(directory, 301)


@pytest.mark.crash
@pytest.mark.parametrize(
    "failpoint",
    [f"{point}=crash" for point in BEFORE_COMMIT + AFTER_COMMIT]
    + ["compaction.after_cleaned_batch=crash@7"],
)
def test_sigkill_at_each_step_of_a_compaction(tmp_path: Path, failpoint: str) -> None:
    writes = fill_for_compactor(tmp_path)
    compactor = run_compactor(tmp_path, "compact", failpoint)
    _, errors = compactor.communicate(timeout=60)
    assert compactor.returncode == -signal.SIGKILL, errors
    point = failpoint.split("=")[0]
    left = leftovers(tmp_path)  # the state the kill left, for recovery to resolve
    if point in BEFORE_COMMIT:
        assert left and all(name.endswith(".cleaned") for name in left)
    elif point != "compaction.after_swap":
        assert any(name.endswith(".log.swap") for name in left), left
    assert reopen_and_check(tmp_path, writes) == writes + 100


@pytest.mark.crash
def test_sigkill_at_random_moments_while_writing_and_compacting(tmp_path: Path) -> None:
    generator = random.Random(20240611)
    acknowledged = 0
    for _ in range(4):
        process = run_compactor(tmp_path, "loop")
        assert process.stdout is not None
        deadline = time.monotonic() + generator.uniform(0.3, 1.2)
        for line in process.stdout:
            acknowledged = max(acknowledged, int(line) + 1)
            if time.monotonic() > deadline:
                break
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=60)  # reaps it and closes its pipes
        acknowledged = reopen_and_check(tmp_path, acknowledged)
    assert len(segment_files(tmp_path)) < acknowledged * 80 / 3000  # it did compact
