"""Real crashes: a writer process killed with SIGKILL mid-append, or by a failpoint.

The writer prints "TAG BASE_OFFSET" after each append returns (an
acknowledgement). After the kill, a fresh open must hold every acknowledged
batch, whole and in order; an unacknowledged last batch may or may not be there.
A SIGKILL keeps the page cache, so these tests check the log's own logic
(recovery, ordering of writes and checkpoints), not the disk's fsync promise.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from twinlog.engine.base.failpoints import ENVIRONMENT_VARIABLE
from twinlog.engine.log import DataLog, LogConfig, LogReader
from twinlog.engine.records.batch_reader import RecordBatch, iter_batches

pytestmark = pytest.mark.crash

WRITER = textwrap.dedent(
    """
    import sys
    from twinlog.engine.records.batch_builder import RecordBatchBuilder
    from twinlog.engine.log import DataLog, LogConfig

    directory, first_tag, count, segment_bytes, many = sys.argv[1:6]
    log = DataLog.open(directory, LogConfig(segment_bytes=int(segment_bytes),
                                            index_interval_bytes=512))

    def batch(tag):
        builder = RecordBatchBuilder("none")
        for record in range(1 + tag % 4):
            builder.append(f"{tag}:{record}:".encode() * 8, timestamp_ms=1_700_000_000_000 + tag)
        return builder.build()

    tags = range(int(first_tag), int(first_tag) + int(count))
    if many == "many":
        first, next_offset = log.append_all_as_leader(batch(tag) for tag in tags)
        print("many", first, next_offset, flush=True)
    else:
        for tag in tags:
            print(tag, log.append_as_leader(batch(tag)), flush=True)
    log.close()
    print("done", flush=True)
    """
)


def _expected_values(tag: int) -> list[bytes]:
    return [f"{tag}:{record}:".encode() * 8 for record in range(1 + tag % 4)]


def _start_writer(
    directory: Path,
    first_tag: int,
    count: int,
    *,
    segment_bytes: int = 20_000,
    many: bool = False,
    failpoint: str = "",
) -> subprocess.Popen[str]:
    environment = dict(os.environ)
    environment.pop(ENVIRONMENT_VARIABLE, None)
    if failpoint:
        environment[ENVIRONMENT_VARIABLE] = failpoint
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            WRITER,
            str(directory),
            str(first_tag),
            str(count),
            str(segment_bytes),
            "many" if many else "one",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
    )


def _check_acknowledged(directory: Path, acknowledged: dict[int, int]) -> DataLog:
    """Every acknowledged (tag -> base offset) batch is there, whole; returns the open log."""
    log = DataLog.open(directory, LogConfig(segment_bytes=20_000, index_interval_bytes=512))
    log.check()
    for tag, base_offset in acknowledged.items():
        batch = next(iter_batches(log.read(base_offset, 1)))
        assert batch.header.base_offset == base_offset, tag
        assert [record.value for record in batch.records()] == _expected_values(tag)
    offsets = sorted(acknowledged.values())
    assert offsets == [acknowledged[tag] for tag in sorted(acknowledged)]  # in order
    # The whole log is CRC-clean, contiguous, and the read-only reader agrees, up to
    # an append_all_as_leader the kill cut short (its batches are hidden until a write).
    headers = list(log.iter_headers(log.log_start_offset)) if log.log_end_offset else []
    for earlier, later in itertools.pairwise(headers):
        assert earlier.next_offset == later.base_offset
    reader = LogReader(directory)
    assert [h.base_offset for h, _ in reader.iter_batches()] == [
        h.base_offset for h in headers if h.next_offset <= reader.end_offset()
    ]
    return log


def test_sigkill_mid_append_loses_no_acknowledged_batch(tmp_path: Path) -> None:
    acknowledged: dict[int, int] = {}
    for round_number in range(3):
        first_tag = 10_000 * (round_number + 1)
        writer = _start_writer(tmp_path, first_tag, 100_000)
        assert writer.stdout is not None
        while len(acknowledged) < 150 * (round_number + 1):
            line = writer.stdout.readline()
            assert line, writer.stderr.read() if writer.stderr else "writer died"
            tag, base_offset = map(int, line.split())
            acknowledged[tag] = base_offset
        os.kill(writer.pid, signal.SIGKILL)
        for line in writer.stdout:  # acknowledgements already in the pipe count too
            tag, base_offset = map(int, line.split())
            acknowledged[tag] = base_offset
        writer.communicate(timeout=30)  # reaps it and closes its pipes
        assert writer.returncode == -signal.SIGKILL
        log = _check_acknowledged(tmp_path, acknowledged)
        assert log.recovery_report.batches_checked > 0  # it was an unclean open
        assert len(list(tmp_path.glob("*.log"))) > round_number + 1  # rolls happened
        log.close()


@pytest.mark.parametrize(
    ("point", "crash_at"),
    [("log.before_fsync", 7), ("log.after_fsync", 7), ("log.before_write", 5)],
)
def test_failpoint_crash_loses_no_acknowledged_batch(
    tmp_path: Path, point: str, crash_at: int
) -> None:
    writer = _start_writer(
        tmp_path, 0, 50, segment_bytes=1 << 20, failpoint=f"{point}=crash@{crash_at}"
    )
    output, errors = writer.communicate(timeout=60)
    assert writer.returncode == -signal.SIGKILL, errors
    acknowledged = {
        int(tag): int(base) for tag, base in (line.split() for line in output.splitlines())
    }
    assert sorted(acknowledged) == list(range(crash_at - 1))  # one fsync and one write per append
    log = _check_acknowledged(tmp_path, acknowledged)
    # The batch being appended at the crash: absent if not written yet, whole if it was.
    kept = sum(1 for _ in log.iter_headers(0)) if log.log_end_offset else 0
    assert kept == (crash_at - 1 if point == "log.before_write" else crash_at)
    log.close()


def test_crash_inside_append_all_as_leader_leaves_a_clean_prefix(tmp_path: Path) -> None:
    writer = _start_writer(
        tmp_path, 0, 40, segment_bytes=2_000, many=True, failpoint="log.before_write=crash@25"
    )
    output, errors = writer.communicate(timeout=60)
    assert writer.returncode == -signal.SIGKILL, errors
    assert output == ""  # never acknowledged
    log = _check_acknowledged(tmp_path, {})
    # What a copier finds and cuts: a prefix of the batches, each whole.
    headers = list(log.iter_headers(0))
    assert len(headers) == 24
    assert LogReader(tmp_path).end_offset() == 0  # readers of the files never see it
    for tag, header in enumerate(headers):
        batch = RecordBatch(log.read(header.base_offset, 1))
        assert [record.value for record in batch.records()] == _expected_values(tag)
    assert log.truncate_to(0) > 0
    log.close()
