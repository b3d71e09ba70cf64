"""The log's group fsync (``flush_beside_appends``), counted and, if asked, held: for the
tests of group commit (the data log's ``GroupFlush``, the coordinator's journal)."""

from __future__ import annotations

import threading

import pytest

import twinlog.engine.log.segment_list as segment_list_module

HELD_FSYNC_WAIT_S = 10


class HeldFsync:
    """Counts the fsyncs of ``flush_beside_appends``; each waits for ``release`` (set at
    once unless ``held``), and ``entered`` tells that one began."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, held: bool = True) -> None:
        self.real = segment_list_module.fsync_segment_fd
        self.count = 0
        self.entered = threading.Event()
        self.release = threading.Event()
        if not held:
            self.release.set()
        monkeypatch.setattr(segment_list_module, "fsync_segment_fd", self)

    def __call__(self, fd: int) -> None:
        self.count += 1
        self.entered.set()
        assert self.release.wait(HELD_FSYNC_WAIT_S), "a held fsync was never released"
        self.real(fd)
