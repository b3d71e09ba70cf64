"""A log opens its files' descriptors on first use: an idle partition holds none.

A broker holds every partition of its cluster; opened eagerly, each took eight
descriptors (data log and journal log: a segment opened twice, two index files), so a
20,000 open-files limit capped a cluster at about 2,400 partitions. These tests pin
the new rule and what it must not break: reads racing a deletion, a closed log, and
the open-files limit reached at an append (a typed refusal, nothing half-written).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from log_support import batch_values, make_batch, read_all

from twinlog.engine.broker.broker import Broker
from twinlog.engine.log import DataLog, LogConfig


def descriptors_under(directory: Path) -> list[str]:
    """The files under ``directory`` this process holds descriptors on."""
    held = []
    for entry in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(entry)
        except OSError:  # closed meanwhile (the listing's own descriptor)
            continue
        if target.startswith(str(directory)):
            held.append(Path(target).name)
    return sorted(held)


def test_an_opened_log_holds_no_descriptor_until_it_is_written_or_read(tmp_path: Path) -> None:
    with DataLog.open(tmp_path, LogConfig()) as log:
        assert descriptors_under(tmp_path) == []
        log.append_as_leader(make_batch(3, tag=1))
        # the write fd only: the first batch is no index point (position 0 needs none)
        assert descriptors_under(tmp_path) == ["00000000000000000000.log"]
        assert batch_values(read_all(log)) == [b"1:0:vvvvvv", b"1:1:vvvvvv", b"1:2:vvvvvv"]
        assert descriptors_under(tmp_path).count("00000000000000000000.log") == 2  # + read fd
    assert descriptors_under(tmp_path) == []
    # Reopened, it holds the read fd recovery checked the data through, nothing else.
    with DataLog.open(tmp_path, LogConfig()) as log:
        assert descriptors_under(tmp_path) == ["00000000000000000000.log"]
        assert batch_values(read_all(log))[-1] == b"1:2:vvvvvv"


def test_a_segment_deleted_before_any_read_is_still_read_by_those_holding_it(
    tmp_path: Path,
) -> None:
    config = LogConfig(segment_bytes=300, retention_bytes=0, retention_ms=-1)
    with DataLog.open(tmp_path, config) as log:
        for tag in range(6):
            log.append_as_leader(make_batch(2, value_bytes=40, tag=tag))
        oldest = log._segment_list.snapshot().segments[0]  # what a reader takes
        assert log.apply_retention() > 0
        assert not oldest.path.exists()
        # A reader that took the segment before the deletion reads it to the end.
        assert batch_values(oldest.read(0, oldest.size_bytes))[:1] == [b"0:0:" + b"v" * 36]


def test_a_closed_segment_is_not_opened_again(tmp_path: Path) -> None:
    log = DataLog.open(tmp_path, LogConfig())
    log.append_as_leader(make_batch(1))
    segment = log._segment_list.snapshot().segments[0]
    log.close()
    with pytest.raises(OSError, match="closed"):
        segment.read(0, 10)
    assert descriptors_under(tmp_path) == []


def test_a_broker_holds_no_descriptor_for_its_idle_partitions(tmp_path: Path) -> None:
    broker = Broker.open(tmp_path)
    try:
        before = len(os.listdir("/proc/self/fd"))
        broker.create_topic("idle", partitions=40)
        # every partition's data log and journal log are open, their files unopened
        assert [name for name in descriptors_under(tmp_path) if name.endswith("index")] == []
        assert [name for name in descriptors_under(tmp_path) if name.endswith(".log")] == []
        assert len(os.listdir("/proc/self/fd")) - before < 40
    finally:
        broker.close()


OUT_OF_DESCRIPTORS = textwrap.dedent(
    """
    import os, resource, sys
    sys.path.insert(0, {support!r})
    from log_support import batch_values, make_batch, read_all
    from twinlog.engine.base.errors import NotEnoughResourcesError
    from twinlog.engine.log import DataLog, LogConfig

    log = DataLog.open({directory!r}, LogConfig())  # opened, holding no descriptor
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 8, hard))
    fillers = []
    try:
        while True:
            fillers.append(os.open("/dev/null", os.O_RDONLY))
    except OSError:
        pass
    try:
        log.append_as_leader(make_batch(1, tag=2))
        print("APPENDED")
    except NotEnoughResourcesError as error:
        print("REFUSED", error)
    for fd in fillers:
        os.close(fd)
    print("AFTER", log.log_end_offset)
    log.append_as_leader(make_batch(1, tag=3))
    print("VALUES", batch_values(read_all(log)))
    log.close()
    print("REOPENED", batch_values(read_all(DataLog.open({directory!r}, LogConfig()))))
    """
)


def test_an_append_that_finds_no_descriptor_left_is_refused_and_writes_nothing(
    tmp_path: Path,
) -> None:
    support = Path(__file__).resolve().parents[2] / "support"
    script = OUT_OF_DESCRIPTORS.format(support=str(support), directory=str(tmp_path))
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    refused = [line for line in lines if line.startswith("REFUSED")]
    assert refused, done.stdout
    assert "ulimit -n" in refused[0] and "open files" in refused[0]
    assert "AFTER 0" in lines  # nothing of the refused append was kept
    assert "VALUES [b'3:0:vvvvvv']" in lines
    assert lines[-1] == "REOPENED [b'3:0:vvvvvv']"


def test_a_log_whose_directory_was_made_anew_touches_nothing_of_the_new_files(
    tmp_path: Path,
) -> None:
    # A reassignment moves a copy away (its directory removed) and back (made again, by a
    # new log of the same partition). A stale log object still about — here one never
    # written or read since it opened, so it holds no descriptor — must not reach the new
    # replica's files through their names: an eager descriptor held the old, removed file.
    directory = tmp_path / "t-0"
    stale = DataLog.open(directory, LogConfig())
    stale.append_as_leader(make_batch(2, tag=1))
    stale.close()
    stale = DataLog.open(directory, LogConfig())  # reopened: idle, no write fd yet
    shutil.rmtree(directory)
    with DataLog.open(directory, LogConfig()) as fresh:
        for tag in range(3):
            fresh.append_as_leader(make_batch(2, tag=10 + tag))
        fresh.flush()
        written = (directory / "00000000000000000000.log").read_bytes()
        with pytest.raises(OSError) as refused:
            stale.truncate_to(0)
        assert refused.value.errno == errno.ESTALE and "no longer the file" in str(refused.value)
        with pytest.raises(OSError):
            stale.append_as_leader(make_batch(1, tag=99))
        assert (directory / "00000000000000000000.log").read_bytes() == written
        assert len(batch_values(read_all(fresh))) == 6
    with contextlib.suppress(OSError):
        stale.close()
