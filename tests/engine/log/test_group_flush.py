"""GroupFlush: writers that append without an fsync share the next one (group commit)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from fsync_support import HeldFsync
from log_support import make_batch

from twinlog.engine.log import DataLog, GroupFlush, LogConfig

WAIT_S = 10


def test_a_deferred_append_is_not_fsynced_until_a_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fsyncs = HeldFsync(monkeypatch, held=False)
    with DataLog.open(tmp_path, LogConfig(flush_policy="every_append")) as log:
        flush = GroupFlush(log)
        log.append_as_leader(make_batch(), defer_flush=True)
        assert fsyncs.count == 0
        flush.wait_durable(log.log_end_offset)
        assert fsyncs.count == 1
        flush.wait_durable(log.log_end_offset)  # covered: no second fsync
        assert (fsyncs.count, flush.fsyncs) == (1, 1)


def test_writers_waiting_behind_an_fsync_share_the_next_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fsyncs = HeldFsync(monkeypatch)
    with DataLog.open(tmp_path, LogConfig(flush_policy="every_append")) as log:
        flush = GroupFlush(log)
        write_lock = threading.Lock()  # as the coordinator's: held to append, not to wait
        returned: list[int] = []

        def writer(tag: int) -> None:
            with write_lock:
                log.append_as_leader(make_batch(tag=tag), defer_flush=True)
                end_offset = log.log_end_offset
            flush.wait_durable(end_offset)
            returned.append(tag)

        first = threading.Thread(target=writer, args=(0,))
        first.start()
        assert fsyncs.entered.wait(WAIT_S)  # the first writer's fsync is held on the disk
        others = [threading.Thread(target=writer, args=(tag,)) for tag in range(1, 8)]
        for thread in others:
            thread.start()
        # Every other writer appended while the fsync was held: the lock was free.
        for _ in range(200):
            if log.log_end_offset == 8:
                break
            threading.Event().wait(0.01)
        assert log.log_end_offset == 8
        assert returned == []  # nobody answered before its batch was durable
        fsyncs.release.set()
        for thread in [first, *others]:
            thread.join(WAIT_S)
        assert sorted(returned) == list(range(8))
        assert fsyncs.count == 2  # the held one, and one for the seven behind it


def test_a_cut_tail_is_fsynced_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fsyncs = HeldFsync(monkeypatch, held=False)
    with DataLog.open(tmp_path, LogConfig(flush_policy="every_append")) as log:
        flush = GroupFlush(log)
        for tag in range(3):
            log.append_as_leader(make_batch(tag=tag), defer_flush=True)
        flush.wait_durable(3)
        log.truncate_to(1)
        for tag in range(2):
            log.append_as_leader(make_batch(tag=10 + tag), defer_flush=True)
        before = fsyncs.count
        flush.wait_durable(3)  # offsets 1 and 2 are new bytes: not covered by the old fsync
        assert fsyncs.count == before + 1
