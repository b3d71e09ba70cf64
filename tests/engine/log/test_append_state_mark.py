"""The ``append-state`` mark, rewritten in place: it keeps one length, reads back what
was written, replaces a file an older version wrote (unpadded), and a reader that meets
a rewrite reads again instead of taking a torn copy for "nothing in progress"."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from twinlog.engine.base.in_place_file import write_in_place
from twinlog.engine.log.checkpoints import (
    APPEND_STATE_NAME,
    AppendState,
    _encode,
    read_append_state,
    write_append_state,
)


def test_the_mark_keeps_one_length_and_reads_back(tmp_path: Path) -> None:
    sizes = set()
    for state in (AppendState(1, 1, 0), AppendState(2, 0, 0), AppendState(2**62, 1, 2**63 - 1)):
        write_append_state(tmp_path, state)
        assert read_append_state(tmp_path) == state
        sizes.add((tmp_path / APPEND_STATE_NAME).stat().st_size)
    assert len(sizes) == 1


def test_an_unpadded_mark_an_older_version_wrote_is_read_then_replaced(tmp_path: Path) -> None:
    (tmp_path / APPEND_STATE_NAME).write_bytes(
        _encode(APPEND_STATE_NAME, AppendState(7, 1, 120)._asdict())
    )
    assert read_append_state(tmp_path) == AppendState(7, 1, 120)
    write_append_state(tmp_path, AppendState(8, 0, 120))
    assert read_append_state(tmp_path) == AppendState(8, 0, 120)


def test_a_torn_read_is_read_again(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A copy whose CRC does not match (as a read in the middle of a rewrite sees it) is
    read again; the writer's next rewrite makes it whole."""
    write_append_state(tmp_path, AppendState(3, 1, 500))
    path = tmp_path / APPEND_STATE_NAME
    whole = path.read_bytes()
    torn = whole.replace(b"in_progress 00000000000000000001", b"in_progress 00000000000000000000")
    assert torn != whole and len(torn) == len(whole)
    path.write_bytes(torn)
    timer = threading.Timer(0.002, lambda: write_in_place(path, whole))
    timer.start()
    try:
        with caplog.at_level(logging.WARNING):
            assert read_append_state(tmp_path) == AppendState(3, 1, 500)
    finally:
        timer.join()
    assert "CRC mismatch" not in caplog.text


def test_a_mark_damaged_for_good_reads_as_none_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_append_state(tmp_path, AppendState(3, 1, 500))
    path = tmp_path / APPEND_STATE_NAME
    path.write_bytes(path.read_bytes().replace(b"500", b"501"))
    with caplog.at_level(logging.WARNING):
        assert read_append_state(tmp_path) is None
    assert caplog.text.count("CRC mismatch") == 1


def test_readers_never_see_a_torn_mark_while_it_is_rewritten(tmp_path: Path) -> None:
    """A writer flips the mark as fast as it can while a reader reads it: every read is
    one of the states written, never None (bounded: 3,000 reads)."""
    states = [AppendState(n, n % 2, 1_000 + n) for n in range(1, 200)]
    write_append_state(tmp_path, states[0])
    stop = threading.Event()

    def write() -> None:
        while not stop.is_set():
            for state in states:
                write_append_state(tmp_path, state)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        seen = [read_append_state(tmp_path) for _ in range(3_000)]
    finally:
        stop.set()
        writer.join()
    assert None not in seen
    assert set(seen) <= set(states)
