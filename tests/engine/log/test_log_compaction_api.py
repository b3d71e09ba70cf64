"""The compaction API of DataLog (compaction_turn, segments_view, replace_segments), and
that compaction.py reaches the log through it alone."""

from __future__ import annotations

import ast
import os
import threading
from pathlib import Path

import pytest
from log_support import read_all, segment_files
from test_log_compaction import (
    NOW_MS,
    check_contiguous,
    compacted,
    fill,
    keyed_batch,
    latest_by_key,
)

from twinlog.engine.base import failpoints
from twinlog.engine.base.errors import LogClosedError
from twinlog.engine.base.failpoints import FailpointError
from twinlog.engine.log import DataLog, compact
from twinlog.engine.log import compaction as compaction_module
from twinlog.engine.log.compaction_files import CleanedSegmentWriter
from twinlog.engine.log.compaction_turns import RUNNING
from twinlog.engine.log.segment import Segment
from twinlog.engine.log.segment_list import SegmentList
from twinlog.engine.records.batch_reader import iter_batches


def private_data_log_members(directory: Path) -> set[str]:
    """Every private name of a DataLog and of its segment list: their classes' and an open
    instance's attributes."""
    with DataLog.open(directory, compacted()) as log:
        names = set(dir(DataLog)) | set(vars(log))
        names |= set(dir(SegmentList)) | set(vars(log._segment_list))
    return {name for name in names if name.startswith("_") and not name.startswith("__")}


def private_names_touched(source: str, private: set[str]) -> list[str]:
    """The private names of ``private`` that ``source`` reads, writes or calls, by attribute
    (``log._segments``, whatever the variable is called) or by string (``getattr``)."""
    touched = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in private:
            touched.append((node.lineno, f"line {node.lineno}: .{node.attr}"))
        elif isinstance(node, ast.Constant) and node.value in private:
            touched.append((node.lineno, f"line {node.lineno}: {node.value!r}"))
    return [text for _, text in sorted(touched)]


def test_compaction_touches_no_private_member_of_data_log(tmp_path: Path) -> None:
    private = private_data_log_members(tmp_path)
    assert {"_segment_list", "_segments", "_write_lock", "_truncations"} <= private  # it sees them
    source = Path(compaction_module.__file__).read_text()
    assert private_names_touched(source, private) == []


def test_the_private_member_check_catches_each_way_in(tmp_path: Path) -> None:
    private = private_data_log_members(tmp_path)
    source = (
        "with log._write_lock:\n"
        "    target = log\n"
        "    target._segments[0:2] = [cleaned]\n"
        "    getattr(log, '_roll')()\n"
        "header._replace(crc=0)\n"  # another type's private name is not DataLog's
    )
    assert private_names_touched(source, private) == [
        "line 1: ._write_lock",
        "line 3: ._segments",
        "line 4: '_roll'",
    ]


# --- turns ---------------------------------------------------------------------------


def test_one_compaction_turn_at_a_time(tmp_path: Path) -> None:
    with DataLog.open(tmp_path, compacted()) as log:
        fill(log, 60)
        with log.compaction_turn() as first:
            assert first == ""
            with log.compaction_turn() as second:
                assert second == RUNNING
            assert compact(log, NOW_MS).skipped == RUNNING
            other: list[str] = []

            def take_a_turn() -> None:
                with log.compaction_turn() as refused:
                    other.append(refused)

            thread = threading.Thread(target=take_a_turn)
            thread.start()
            thread.join()
            assert other == [RUNNING]  # another thread does not wait for it either
        with log.compaction_turn() as again:
            assert again == ""
        assert compact(log, NOW_MS).segments_replaced > 0


def test_a_view_holds_the_segments_as_they_are(tmp_path: Path) -> None:
    with DataLog.open(tmp_path, compacted()) as log:
        fill(log, 60)
        with log.segments_view() as view:
            files = segment_files(tmp_path)
            assert [s.path for s in (*view.sealed, view.active)] == files
            assert view.sealed_size_bytes == tuple(os.path.getsize(p) for p in files[:-1])
            assert view.log_end_offset == log.log_end_offset
            assert view.recovery_point_base_offset <= view.active.base_offset
            assert view.compaction_turn == 0  # taken outside a turn: it cannot swap
        with log.compaction_turn(), log.segments_view() as in_turn:
            assert in_turn.compaction_turn > 0
    with pytest.raises(LogClosedError), log.segments_view():
        pass


# --- replace_segments ------------------------------------------------------------------


def merged(log: DataLog, old: tuple[Segment, ...]) -> CleanedSegmentWriter:
    """A finished cleaned segment holding every batch of ``old`` as it is."""
    writer = CleanedSegmentWriter(
        log.directory, old[0].base_offset, log.config.index_interval_bytes
    )
    for segment in old:
        for batch in iter_batches(segment.read(0, segment.size_bytes)):
            writer.append(batch.buffer, batch.header)
    writer.finish(max(os.stat(segment.path).st_mtime_ns for segment in old))
    return writer


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith((".cleaned", ".swap")))


def test_replace_segments_swaps_and_publishes_keeping_every_offset(tmp_path: Path) -> None:
    with DataLog.open(tmp_path, compacted()) as log:
        model = fill(log, 60)
        before = read_all(log)
        with log.compaction_turn() as refused:
            assert refused == ""
            with log.segments_view() as view:
                old = view.sealed[1:3]
            assert log.replace_segments(old, merged(log, old), view)
        assert len(segment_files(tmp_path)) == len(view.sealed)  # two became one
        with log.segments_view() as after:
            assert after.sealed[1].base_offset == old[0].base_offset
            assert after.sealed[2].base_offset == old[1].tail().next_offset
        assert read_all(log) == before and latest_by_key(log) == model
        check_contiguous(log)
        assert leftovers(tmp_path) == []
    with DataLog.open(tmp_path, compacted()) as reopened:
        assert read_all(reopened) == before
        check_contiguous(reopened)


def test_replace_segments_refuses_after_a_truncation_and_deletes_the_new_files(
    tmp_path: Path,
) -> None:
    with DataLog.open(tmp_path, compacted()) as log:
        fill(log, 60)
        with log.compaction_turn():
            with log.segments_view() as view:
                old = view.sealed[:2]
            new = merged(log, old)
            log.truncate_to(
                log.append_as_leader(keyed_batch([(b"k", b"cut")]))
            )  # cuts nothing sealed
            before = read_all(log)
            assert not log.replace_segments(old, new, view)
        assert leftovers(tmp_path) == [] and not new.finished
        with log.segments_view() as after:
            assert after.sealed[:2] == old
        assert read_all(log) == before
        check_contiguous(log)


def test_replace_segments_refuses_segments_no_longer_in_the_log(tmp_path: Path) -> None:
    config = compacted(cleanup_policy="compact,delete", retention_bytes=1)
    with DataLog.open(tmp_path, config) as log:
        fill(log, 60)
        with log.compaction_turn():
            with log.segments_view() as view:
                old = view.sealed[:2]
            new = merged(log, old)
            assert log.apply_retention(NOW_MS) > 0  # deletes them under the compaction
            assert not log.replace_segments(old, new, view)
        assert leftovers(tmp_path) == []
        check_contiguous(log)


def test_replace_segments_needs_the_turn_its_view_was_taken_in(tmp_path: Path) -> None:
    with DataLog.open(tmp_path, compacted()) as log:
        fill(log, 60)
        with log.segments_view() as outside:
            old = outside.sealed[:2]
        new = merged(log, old)
        with pytest.raises(AssertionError, match="compaction turn"):
            log.replace_segments(old, new, outside)  # no turn at all
        with log.compaction_turn():
            with log.segments_view() as earlier:
                pass
        with log.compaction_turn():
            with pytest.raises(AssertionError, match="compaction turn"):
                log.replace_segments(old, new, earlier)  # a turn, but not this one
            with log.segments_view() as view:
                pass
            with pytest.raises(AssertionError):
                log.replace_segments(view.sealed[:3], new, view)  # offsets do not match
            assert log.replace_segments(old, new, view)  # and the right call works
        check_contiguous(log)


@pytest.mark.usefixtures("disarmed")
def test_a_swap_failing_after_its_commit_stops_compaction_until_reopened(
    tmp_path: Path,
) -> None:
    with DataLog.open(tmp_path, compacted()) as log:
        model = fill(log, 60)
        before = read_all(log)
        with log.compaction_turn():
            with log.segments_view() as view:
                old = view.sealed[:2]
            failpoints.arm("compaction.after_delete_replaced", "raise")
            with pytest.raises(FailpointError):
                log.replace_segments(old, merged(log, old), view)
            failpoints.disarm_all()
        assert read_all(log) == before  # the old segments, through their descriptors
        with log.compaction_turn() as refused:
            assert "reopen the log to finish it" in refused
    with DataLog.open(tmp_path, compacted()) as reopened:
        assert reopened.recovery_report.compaction_finished
        assert read_all(reopened) == before and latest_by_key(reopened) == model
        with reopened.compaction_turn() as refused:
            assert refused == ""
        check_contiguous(reopened)
