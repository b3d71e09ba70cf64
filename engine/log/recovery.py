"""Recovery of a data log directory on open, in numbered passes (like Kafka's LogLoader).

The format it recovers is described in files.py (names), segment.py (segment
files), segment_index.py (indexes) and checkpoints.py (checkpoint files); the
whole picture, with a worked example, is in docs/formats.md (Data log).

Rules:

1. Only what lies after the recovery point is scanned: the recovery-point
   segment from its checkpointed position, and every later segment whole.
   Earlier segments were fsynced with their indexes before the checkpoint was
   written, so they are trusted; their indexes get a cheap size check now and a
   full sanity check on first use (and are rebuilt if either fails). So a
   cleanly closed log is opened without reading a batch, and after a crash the
   work is bounded by the bytes appended since the last recovery point (at most
   a segment, or RECOVERY_POINT_INTERVAL_BYTES), never by the log's history.
   No (or an unreadable) recovery point means: scan everything. A verified
   recovery point (v2, CRC good) is a promise: a segment shorter than it, or
   missing, is acknowledged data lost and raises CorruptLogError, as does a bad
   batch before it; an unverified (v1) one is only a hint. Bytes before the
   recovery point are CRC-checked later, the first time a read serves them
   (``DataLog.read``), not here.
2. A scanned batch is good when its length fits, its header parses, its CRC
   matches, and its base offset is the next offset of the batch before it.
3. At the first bad batch, search the rest of the file for a plausible valid
   batch (scan.find_valid_batch_after). None, and no later segment holds data:
   a *torn tail*. Its bytes are copied to ``<segment>.log.<position>.corrupt``
   (fsynced), the segment is truncated at the bad batch and fsynced, empty later
   segments are deleted, and the report and the log (WARNING) say how many bytes
   at which position. Otherwise: corruption in the middle; ``CorruptLogError``
   names the file and position and the log is not opened. Bad bytes are never
   skipped.
4. Index entries at or after the scan start are rebuilt by the scan; a
   missing or damaged index is rebuilt from the whole segment.
5. Finally the scanned segments and their indexes are fsynced and a new
   recovery point (the log end) is written, so a second crash does not rescan.
0. Before all of this, a compaction that a crash interrupted is finished or
   forgotten (compaction_files.py: uncommitted ``.cleaned`` files are deleted,
   a committed ``.swap`` is put in place), so the passes see whole segments.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from twinlog.engine.base.errors import CorruptLogError
from twinlog.engine.log.checkpoints import (
    LOG_START_OFFSET_NAME,
    RECOVERY_POINT_NAME,
    RecoveryPoint,
    read_log_start_offset,
    read_recovery_point_checked,
    try_write_recovery_point,
)
from twinlog.engine.log.compaction_files import finish_interrupted_compactions
from twinlog.engine.log.config import LogConfig
from twinlog.engine.log.files import (
    CORRUPT_SUFFIX,
    INDEX_SUFFIX,
    TEMPORARY_SUFFIX,
    TIME_INDEX_SUFFIX,
    corrupt_copy_path,
    fsync_directory,
    fsync_file,
    index_path,
    list_segment_base_offsets,
    segment_stem,
    time_index_path,
)
from twinlog.engine.log.old_layout import refuse_old_layout
from twinlog.engine.log.scan import SCAN_CHUNK_BYTES, find_valid_batch_after
from twinlog.engine.log.segment import Segment
from twinlog.engine.log.segment_index import (
    OFFSET_ENTRY_BYTES,
    TIME_ENTRY_BYTES,
    IndexDamagedError,
    SegmentIndex,
)

logger = logging.getLogger(__name__)


@dataclass
class RecoveryReport:
    """What ``DataLog.open`` checked and cut."""

    segments_checked: int = 0  # segments whose bytes after the recovery point were scanned
    batches_checked: int = 0  # batches validated (length, header, CRC, offset continuity)
    bytes_truncated: int = 0  # bytes cut from a torn tail (0 if none)
    truncated_at: tuple[str, int] | None = None  # (segment path, position) of the cut
    corrupt_copy: str | None = None  # where the cut bytes were copied
    indexes_rebuilt: list[str] = field(default_factory=list)  # segments whose index was bad
    segments_deleted: list[str] = field(default_factory=list)  # below log start / empty after a cut
    compaction_finished: list[str] = field(default_factory=list)  # interrupted compactions resolved
    recovery_point: RecoveryPoint | None = None  # where scanning started; None: scanned all
    duration_ms: float = 0.0


@dataclass
class RecoveredLog:
    segments: list[Segment]  # ascending base offsets; the last one is open for appending
    log_start_offset: int
    report: RecoveryReport


def recover(directory: Path, config: LogConfig) -> RecoveredLog:
    started = time.perf_counter()
    report = RecoveryReport()

    # Pass 1: the directory, leftovers of interrupted writes, and the segment list.
    directory.mkdir(parents=True, exist_ok=True)
    refuse_old_layout(directory)  # before anything here is changed: old data is not damage
    report.compaction_finished = finish_interrupted_compactions(directory)
    base_offsets = _list_and_tidy(directory)

    # Pass 2: checkpoints.
    log_start_checkpoint = read_log_start_offset(directory)
    recovery_point, point_verified = read_recovery_point_checked(directory)

    # Pass 3: finish an interrupted retention (the checkpoint is written before deletion).
    while (
        log_start_checkpoint is not None
        and len(base_offsets) > 1
        and base_offsets[1] <= log_start_checkpoint
    ):
        _delete_segment_files(directory, base_offsets.pop(0), report)

    # Pass 4: an empty directory gets its first segment.
    if not base_offsets:
        first_offset = log_start_checkpoint or 0
        Segment.create(directory, first_offset, config.index_interval_bytes).close()
        fsync_directory(directory)
        base_offsets = [first_offset]
    segments = [
        Segment.open_existing(directory, base_offset, config.index_interval_bytes)
        for base_offset in base_offsets
    ]

    # Pass 5: where scanning starts, and up to where the bytes are known durable.
    start = _scan_start(segments, recovery_point, point_verified)
    durable_position = 0  # in segments[first_scanned]: a bad batch before it is lost data
    if start is None:
        first_scanned, start_position, expected_next_offset = 0, 0, segments[0].base_offset
    else:
        report.recovery_point = recovery_point
        first_scanned, start_position, expected_next_offset = start
        if point_verified and recovery_point is not None:
            durable_position = recovery_point.position

    # Pass 6: trusted segments: a cheap index check now, the full one on first use.
    for segment in segments[:first_scanned]:
        problem = _index_size_problem(segment)
        if problem:
            logger.warning("rebuilding the indexes of %s: %s", segment.path, problem)
            index, batches_checked = segment.rebuild_index()
            segment.set_index(index)
            report.indexes_rebuilt.append(str(segment.path))
            report.batches_checked += batches_checked

    # Pass 7: scan and re-index everything after the recovery point.
    scanned: set[int] = set()  # base offsets of the segments whose bytes were scanned
    segments = _scan_tail(
        segments,
        first_scanned,
        start_position,
        expected_next_offset,
        durable_position,
        report,
        scanned,
    )

    # Pass 8: make what was checked durable (a killed process leaves it in the page
    # cache only), and checkpoint it.
    for segment in segments[first_scanned:]:
        if segment.base_offset in scanned:
            fsync_file(segment.path)  # no descriptor kept: most partitions stay idle
            segment.flush_index()
    active = segments[-1]
    active.open_for_append()
    end_point = RecoveryPoint(active.base_offset, active.size_bytes, active.tail().next_offset)
    if end_point != recovery_point:
        try_write_recovery_point(directory, end_point)  # a full disk must not stop the open

    log_start_offset = segments[0].base_offset
    if log_start_checkpoint is not None and log_start_checkpoint > log_start_offset:
        if log_start_checkpoint <= end_point.next_offset:
            log_start_offset = log_start_checkpoint
        else:
            logger.warning(
                "%s: %s says %d, past the log end %d; starting at %d instead",
                directory,
                LOG_START_OFFSET_NAME,
                log_start_checkpoint,
                end_point.next_offset,
                log_start_offset,
            )
    report.duration_ms = (time.perf_counter() - started) * 1000
    return RecoveredLog(segments, log_start_offset, report)


def _list_and_tidy(directory: Path) -> list[int]:
    """Segment base offsets; deletes temporary files and indexes without a segment."""
    base_offsets = list_segment_base_offsets(directory)
    stems = {segment_stem(base_offset) for base_offset in base_offsets}
    for entry in os.scandir(directory):
        name = entry.name
        orphan_index = (
            name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX)) and name.split(".")[0] not in stems
        )
        if name.endswith(TEMPORARY_SUFFIX) or orphan_index:
            logger.info("%s: deleting leftover %s", directory, name)
            os.unlink(entry.path)
    return base_offsets


def _delete_segment_files(directory: Path, base_offset: int, report: RecoveryReport) -> None:
    segment_file = directory / (segment_stem(base_offset) + ".log")
    logger.warning(
        "deleting %s: it lies wholly below the log start offset (an interrupted retention)",
        segment_file,
    )
    for path in (
        segment_file,
        index_path(directory, base_offset),
        time_index_path(directory, base_offset),
    ):
        path.unlink(missing_ok=True)
    fsync_directory(directory)
    report.segments_deleted.append(str(segment_file))


def _scan_start(
    segments: list[Segment], point: RecoveryPoint | None, verified: bool
) -> tuple[int, int, int] | None:
    """(number of the first segment to scan, position in it, offset expected there).

    None when the recovery point is missing or unusable: scan everything. A
    verified point (its CRC matched) is a promise that its bytes were fsynced:
    a segment shorter than it, or missing, raises CorruptLogError. An unverified
    (version 1) point is only a hint, and falls back to scanning.
    """
    if point is None:
        level = logging.WARNING if any(s.size_bytes for s in segments) else logging.DEBUG
        logger.log(
            level,
            "%s: no usable %s checkpoint; scanning every segment",
            segments[0].directory,
            RECOVERY_POINT_NAME,
        )
        return None
    for number, segment in enumerate(segments):
        if segment.base_offset == point.segment_base_offset:
            if point.position > segment.size_bytes:
                if verified:
                    raise CorruptLogError(
                        f"{segment.path} holds {segment.size_bytes} bytes, but "
                        f"{segment.directory / RECOVERY_POINT_NAME} says its first "
                        f"{point.position} bytes (offsets up to {point.next_offset}) were "
                        "fsynced: acknowledged data is missing from the end of the file, "
                        f"from position {segment.size_bytes}. Restore the segment from a "
                        "backup or replica; to accept the loss instead, copy the directory "
                        f"aside and delete {RECOVERY_POINT_NAME}, and the log opens with what "
                        "is left",
                        str(segment.path),
                        segment.size_bytes,
                    )
                logger.warning(
                    "%s is %d bytes, shorter than its (unverified) recovery point %d; scanning "
                    "it from position 0",
                    segment.path,
                    segment.size_bytes,
                    point.position,
                )
                return number, 0, segment.base_offset
            return number, point.position, point.next_offset
    missing = segments[0].directory / (segment_stem(point.segment_base_offset) + ".log")
    if verified and point.segment_base_offset >= segments[0].base_offset:
        raise CorruptLogError(
            f"{missing} is missing, but {segments[0].directory / RECOVERY_POINT_NAME} says its "
            f"first {point.position} bytes were fsynced: a segment of acknowledged data was "
            "lost. Restore it from a backup or replica; to accept the loss instead, copy the "
            f"directory aside and delete {RECOVERY_POINT_NAME}",
            str(missing),
            0,
        )
    logger.warning(
        "%s: the recovery point names segment %s, which is missing; scanning every segment",
        segments[0].directory,
        segment_stem(point.segment_base_offset),
    )
    return None


def _index_size_problem(segment: Segment) -> str | None:
    """Why the index files of a trusted segment cannot be right, judged from their sizes."""
    try:
        offset_bytes = os.stat(index_path(segment.directory, segment.base_offset)).st_size
        time_bytes = os.stat(time_index_path(segment.directory, segment.base_offset)).st_size
    except FileNotFoundError as error:
        return f"{error.filename} is missing"
    if offset_bytes % OFFSET_ENTRY_BYTES or time_bytes % TIME_ENTRY_BYTES:
        return f"index sizes {offset_bytes} and {time_bytes} are not whole entries"
    if offset_bytes // OFFSET_ENTRY_BYTES != time_bytes // TIME_ENTRY_BYTES:
        return "offset index and time index hold different numbers of entries"
    return None


def _scan_tail(
    segments: list[Segment],
    first_scanned: int,
    start_position: int,
    expected_next_offset: int,
    durable_position: int,
    report: RecoveryReport,
    scanned: set[int],
) -> list[Segment]:
    """Pass 7: validate and re-index; cut a torn tail; raise on corruption in the middle.

    ``durable_position``: bytes of ``segments[first_scanned]`` before it were fsynced
    (a verified recovery point); a bad batch there is never a torn tail.
    """
    for number in range(first_scanned, len(segments)):
        segment = segments[number]
        position = start_position if number == first_scanned else 0
        if position == 0 and number > first_scanned and segment.base_offset != expected_next_offset:
            raise CorruptLogError(
                f"{segment.path} starts at offset {segment.base_offset}, but the segment before "
                f"it ends at offset {expected_next_offset}: a segment is missing or damaged",
                str(segment.path),
                0,
            )
        if position == 0:
            expected_next_offset = segment.base_offset
        index, position, expected_next_offset = _index_prefix(
            segment, position, expected_next_offset, report
        )
        file_bytes = segment.size_bytes
        if position < file_bytes or position == 0:
            scanned.add(segment.base_offset)  # (position 0: its index files were rewritten)
        if position < file_bytes:
            report.segments_checked += 1
        result = segment.scan_and_index(index, position, expected_next_offset)
        report.batches_checked += result.batches_checked
        if (
            result.bad_position is not None
            and number == first_scanned
            and result.bad_position < durable_position
        ):
            raise CorruptLogError(
                f"{segment.path} holds a bad batch at position {result.bad_position} "
                f"({result.bad_reason}), before its recovery point at position "
                f"{durable_position}: those bytes were fsynced and acknowledged, so this is "
                "damage, not a torn tail. Copy the segment aside, then restore it from a "
                "backup or replica",
                str(segment.path),
                result.bad_position,
            )
        if result.bad_position is not None:
            later_data = any(later.size_bytes for later in segments[number + 1 :])
            valid_after = find_valid_batch_after(
                segment.read_fd, result.bad_position, file_bytes, result.next_offset
            )
            if valid_after is not None or later_data:
                where = (
                    f"a valid batch follows at position {valid_after}"
                    if valid_after is not None
                    else "later segments hold batches"
                )
                raise CorruptLogError(
                    f"{segment.path} holds a bad batch at position {result.bad_position} "
                    f"({result.bad_reason}), and {where}: this is corruption in the middle of "
                    "the log, not a torn tail. Copy the segment aside, then restore it or "
                    "truncate it at that position by hand",
                    str(segment.path),
                    result.bad_position,
                )
            _cut_torn_tail(segment, result.bad_position, file_bytes, result.bad_reason, report)
            for later in segments[number + 1 :]:
                later.delete()
                later.close()
                report.segments_deleted.append(str(later.path))
            del segments[number + 1 :]
            fsync_directory(segment.directory)
        segment.size_bytes = result.end_position
        segment.set_index(index)
        segment.forget_tail()
        expected_next_offset = result.next_offset
        if result.bad_position is not None:
            break  # the segments after a cut tail were empty and are gone
    return segments


def _index_prefix(
    segment: Segment, position: int, expected_next_offset: int, report: RecoveryReport
) -> tuple[SegmentIndex, int, int]:
    """The segment's index holding only entries before ``position`` (a new one if it was bad).

    Returns (index, position, expected offset) to scan from: position 0 when the
    index had to be rebuilt from scratch.
    """
    offset_file = index_path(segment.directory, segment.base_offset)
    time_file = time_index_path(segment.directory, segment.base_offset)
    index: SegmentIndex | None = None
    try:
        index = SegmentIndex.load(
            offset_file, time_file, max(segment.size_bytes, 1), keep_before_position=position
        )
        # Cross-check index and recovery point against the data: the walk from the
        # last entry before ``position`` must end exactly there, at the offset the
        # recovery point names. A wrong checkpoint must never make the scan cut
        # good batches.
        next_offset = segment.verified_tail(index, position).next_offset
        if next_offset != expected_next_offset:
            raise IndexDamagedError(
                f"the batches before position {position} end at offset {next_offset}, the "
                f"recovery point says {expected_next_offset}"
            )
    except IndexDamagedError as damage:
        if index is not None:
            index.close()
        logger.warning("rebuilding the indexes of %s from position 0: %s", segment.path, damage)
        report.indexes_rebuilt.append(str(segment.path))
        return SegmentIndex.create(offset_file, time_file), 0, segment.base_offset
    return index, position, expected_next_offset


def _cut_torn_tail(
    segment: Segment, position: int, file_bytes: int, reason: str, report: RecoveryReport
) -> None:
    """Copy ``[position, file_bytes)`` aside, then truncate the segment there; all fsynced."""
    copy_path = corrupt_copy_path(segment.path, position)
    suffix = 0
    while copy_path.exists():  # keep the evidence of an earlier cut at the same position
        suffix += 1
        copy_path = segment.path.with_name(
            f"{segment.path.name}.{position}.{suffix}{CORRUPT_SUFFIX}"
        )
    copy_fd = os.open(copy_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        source_position = position
        while source_position < file_bytes:
            chunk = os.pread(
                segment.read_fd,
                min(SCAN_CHUNK_BYTES, file_bytes - source_position),
                source_position,
            )
            view = memoryview(chunk)
            while view:
                view = view[os.write(copy_fd, view) :]
            source_position += len(chunk)
        os.fsync(copy_fd)
    finally:
        os.close(copy_fd)
    fsync_directory(segment.directory)
    write_fd = os.open(segment.path, os.O_RDWR)
    try:
        os.ftruncate(write_fd, position)
        os.fsync(write_fd)
    finally:
        os.close(write_fd)
    cut_bytes = file_bytes - position
    logger.warning(
        "%s: torn tail: cut %d bytes at position %d (%s); they were copied to %s",
        segment.path,
        cut_bytes,
        position,
        reason,
        copy_path,
    )
    report.bytes_truncated += cut_bytes
    report.truncated_at = (str(segment.path), position)
    report.corrupt_copy = str(copy_path)
