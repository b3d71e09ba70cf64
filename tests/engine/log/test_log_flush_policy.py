"""Flush policies: every_append fsyncs per append, interval by bytes or time, append_all_as_leader once."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from log_support import make_batch

import twinlog.engine.log.segment_list as segment_list_module
from twinlog.engine.base import failpoints
from twinlog.engine.base.errors import DiskFullError
from twinlog.engine.broker.broker import Broker
from twinlog.engine.log import DataLog, LogConfig
from twinlog.engine.log.flush_policy import FlushPolicy

NEVER = 10**12


class FakeClock:
    def __init__(self) -> None:
        self.now_ms = 0

    def __call__(self) -> int:
        return self.now_ms


def test_interval_policy_by_bytes_and_by_time() -> None:
    clock = FakeClock()
    policy = FlushPolicy(
        LogConfig(flush_policy="interval", flush_interval_bytes=100, flush_interval_ms=50), clock
    )
    assert not policy.note_append(60)
    assert policy.note_append(40)  # 100 bytes unflushed
    policy.note_flushed()
    assert not policy.note_append(1)
    clock.now_ms = 49
    assert not policy.note_append(1)
    clock.now_ms = 50
    assert policy.note_append(1)  # the last fsync is 50 ms old


def test_every_append_policy_always_flushes() -> None:
    policy = FlushPolicy(LogConfig(), FakeClock())
    assert policy.note_append(1) and policy.note_append(0)


def _count_fsyncs(directory: Path, config: LogConfig, appends: int, many: bool = False) -> int:
    with DataLog.open(directory, config) as log:
        failpoints.arm("log.before_fsync", "raise", on_hit=NEVER)  # counts, never fires
        batches = [make_batch(1, value_bytes=90, tag=n) for n in range(appends)]
        if many:
            log.append_all_as_leader(batches)
        else:
            for batch in batches:
                log.append_as_leader(batch)
        count = failpoints.hits("log.before_fsync")
        failpoints.disarm_all()
        return count


@pytest.mark.usefixtures("disarmed")
def test_fsync_counts_per_policy(tmp_path: Path) -> None:
    every = LogConfig()
    interval = LogConfig(flush_policy="interval", flush_interval_bytes=700, flush_interval_ms=NEVER)
    batch_bytes = len(make_batch(1, value_bytes=90))
    assert _count_fsyncs(tmp_path / "a", every, 20) == 20
    assert _count_fsyncs(tmp_path / "b", interval, 20) == 20 // -(-700 // batch_bytes)
    assert _count_fsyncs(tmp_path / "c", every, 20, many=True) == 1
    assert _count_fsyncs(tmp_path / "d", interval, 20, many=True) == 1


@pytest.mark.usefixtures("disarmed")
def test_interval_policy_data_is_readable_before_the_fsync(tmp_path: Path) -> None:
    config = LogConfig(flush_policy="interval", flush_interval_bytes=NEVER, flush_interval_ms=NEVER)
    with DataLog.open(tmp_path, config) as log:
        failpoints.arm("log.before_fsync", "raise", on_hit=NEVER)
        log.append_as_leader(make_batch(1))
        assert failpoints.hits("log.before_fsync") == 0
        assert log.read(0, 100)
        log.flush()
        assert failpoints.hits("log.before_fsync") == 1


def test_due_needs_unflushed_bytes_and_an_old_last_fsync() -> None:
    clock = FakeClock()
    policy = FlushPolicy(
        LogConfig(flush_policy="interval", flush_interval_bytes=NEVER, flush_interval_ms=50), clock
    )
    clock.now_ms = 1000
    assert not policy.due()  # the last fsync is old, but nothing waits for one
    policy.note_flushed()
    clock.now_ms = 1010
    assert not policy.note_append(1)
    clock.now_ms = 1049
    assert not policy.due()
    clock.now_ms = 1050  # the last fsync (not the append) is flush_interval_ms old
    assert policy.due()


@pytest.mark.usefixtures("disarmed")
def test_flush_if_due_fsyncs_the_end_of_a_burst(tmp_path: Path) -> None:
    # The interval policy is checked on append; the last appends of a burst would
    # wait for the next append (maybe forever) without flush_if_due.
    clock = FakeClock()
    config = LogConfig(flush_policy="interval", flush_interval_bytes=NEVER, flush_interval_ms=50)
    with DataLog.open(tmp_path, config, clock_ms=clock) as log:
        failpoints.arm("log.before_fsync", "raise", on_hit=NEVER)  # counts, never fires
        assert not log.flush_if_due()  # nothing unflushed
        clock.now_ms = 10
        for n in range(3):
            log.append_as_leader(make_batch(1, tag=n))
        clock.now_ms = 49
        assert not log.flush_if_due()
        assert failpoints.hits("log.before_fsync") == 0
        clock.now_ms = 50
        assert log.flush_if_due()
        assert failpoints.hits("log.before_fsync") == 1
        clock.now_ms = 500
        assert not log.flush_if_due()  # flushed: nothing waits
        assert failpoints.hits("log.before_fsync") == 1
        failpoints.disarm_all()
    assert not log.flush_if_due()  # closed (close flushed it): a no-op, not an error


@pytest.mark.usefixtures("disarmed")
def test_flush_if_due_failure_keeps_the_bytes_due(tmp_path: Path) -> None:
    clock = FakeClock()
    config = LogConfig(flush_policy="interval", flush_interval_bytes=NEVER, flush_interval_ms=50)
    with DataLog.open(tmp_path, config, clock_ms=clock) as log:
        log.append_as_leader(make_batch(1))
        clock.now_ms = 50
        failpoints.arm("log.before_fsync", "enospc", on_hit=1)
        with pytest.raises(DiskFullError):
            log.flush_if_due()
        failpoints.disarm_all()
        assert log.flush_if_due()  # still due: the next round fsyncs it


@pytest.mark.usefixtures("disarmed")
def test_the_broker_fsyncs_an_interval_log_after_its_last_append(tmp_path: Path) -> None:
    with Broker.open(tmp_path, journal_partitions=1) as broker:
        # flush.ms leaves the produce below ample time to return before anything is due.
        topic_config = {"flush.policy": "interval", "flush.ms": "300", "flush.bytes": str(NEVER)}
        broker.create_topic("idle", 1, topic_config)
        failpoints.arm("log.before_fsync", "raise", on_hit=NEVER)  # counts, never fires
        broker.produce("idle", 0, make_batch(1))
        assert failpoints.hits("log.before_fsync") == 0  # the append itself did not fsync
        deadline = time.monotonic() + 10
        while failpoints.hits("log.before_fsync") == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert failpoints.hits("log.before_fsync") == 1  # no further append came; it was fsynced
        failpoints.disarm_all()


def test_flush_beside_appends_lets_appends_go_on_during_its_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The journal logs' writer fsyncs with this while writers append: an append must not
    wait for that fsync (else appends and fsyncs take turns and groups stay at one)."""
    in_fsync = threading.Event()
    release = threading.Event()
    real_fsync = segment_list_module.fsync_segment_fd

    def slow_fsync(fd: int) -> None:
        in_fsync.set()
        assert release.wait(10), "the test never released the fsync"
        real_fsync(fd)

    config = LogConfig(flush_policy="interval", flush_interval_ms=NEVER, flush_interval_bytes=NEVER)
    log = DataLog.open(tmp_path, config)
    for n in range(3):
        log.append_as_leader(make_batch(1, value_bytes=90, tag=n))
    monkeypatch.setattr(segment_list_module, "fsync_segment_fd", slow_fsync)
    durable: list[int] = []
    flusher = threading.Thread(target=lambda: durable.append(log.flush_beside_appends()))
    flusher.start()
    assert in_fsync.wait(10)
    appended_at = time.monotonic()
    offsets = [log.append_as_leader(make_batch(1, value_bytes=90, tag=n)) for n in range(3, 6)]
    assert time.monotonic() - appended_at < 5  # not held back by the fsync in progress
    assert flusher.is_alive()  # the fsync is still going on
    release.set()
    flusher.join(10)
    assert durable == [3]  # what was written before the call, not the appends during it
    assert offsets == [3, 4, 5]
    monkeypatch.setattr(segment_list_module, "fsync_segment_fd", real_fsync)
    assert log.flush_beside_appends() == 6
    log.close()
    with DataLog.open(tmp_path, config) as reopened:
        assert reopened.log_end_offset == 6
