"""The two checkpoint files of a data log: small text files, replaced atomically.

    checkpoint = kind " v2" LF *(field " " decimal-integer LF) "crc32c " 8hex LF

    recovery-point v2                 log-start-offset v2
    segment_base_offset 0             log_start_offset 1200
    position 4096                     crc32c 5d0f3c1a
    next_offset 120
    crc32c 0a1b2c3d

The last line is the CRC-32C of every byte before it, in 8 lowercase hex
digits. Version 1 files (the same without the CRC line) are still read, but
only as a hint: nothing proves that their digits are the ones written.

``recovery-point`` promises: every byte before ``position`` of segment
``segment_base_offset``, every byte of earlier segments, and the index entries
of all of them, were fsynced when the file was written; the batch at
``position`` (if any) has base offset ``next_offset``. Recovery scans only what
lies after it. It is written when a segment rolls (pointing at the start of
the new segment), every ``RECOVERY_POINT_INTERVAL_BYTES`` of flushed appends,
after recovery, after truncate_to, and on close (pointing at the log end, so a
cleanly closed log is not scanned at all). A *verified* recovery point (v2,
CRC good) is held to that promise: a segment shorter than it, or missing, is
lost data, not a torn tail (recovery.py).

``log-start-offset`` is the first offset still stored. Retention writes it
*before* deleting segment files, so a crash in between leaves segments that the
next open deletes instead of serving again.

``append-state`` (``sequence``, ``in_progress``, ``first_offset``) says whether an
``append_all_as_leader`` (the copier applying a committed transaction) is writing its
batches now, and from which offset. The data log publishes such batches to its
readers all at once; a reader of the files (``read_only.LogReader``) ends at
``first_offset`` while ``in_progress`` is 1, so it never ends inside a
transaction either. ``sequence`` grows with every change, so a reader can tell
that an append started or finished while it scanned (and scan again). It is
written without fsync: it must outlive the process (a kill leaves a torn copy
that the broker's next open cuts or finishes), not the machine. Missing (a log
no append_all_as_leader has written since this file existed) reads as nothing in progress.
It changes twice per copied transaction, so it is rewritten in place
(``twinlog.engine.base.in_place_file``: one ``pwrite``, not a rename), its values
zero-padded to 20 digits so that it keeps one length; its reader reads it again
while it does not parse or its CRC does not match (a read that met a rewrite).

``cleaner-offset`` (``first_dirty_offset``) is where log compaction stopped
last time: offsets below it were compacted. It only decides *when* compaction
runs (the dirty ratio, compaction.py), never what it keeps, so a missing or
damaged one costs one compaction of the whole log, never a record.

Every other write replaces the file atomically (``twinlog.engine.base.atomic_file``);
on a full disk it raises DiskFullError and the old file stays. Only the
log-start-offset must be written (retention waits for it); a recovery point that
cannot move forward is kept as it is, still true, and costs the next open a scan.

A file that is missing, that does not parse, or whose CRC does not match,
reads as None: the caller falls back to the conservative choice (scan
everything; start at the first segment) and says so in the log. A flipped bit
in a checkpoint can therefore cost a full scan, never data.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from twinlog.engine.base.atomic_file import fsync_directory, replace_file
from twinlog.engine.base.crc32c import crc32c
from twinlog.engine.base.errors import DiskFullError
from twinlog.engine.base.in_place_file import read_consistent, write_in_place

RECOVERY_POINT_NAME = "recovery-point"
APPEND_STATE_NAME = "append-state"
APPEND_STATE_DIGITS = 20  # every value of an int64's range, so the mark keeps one length
LOG_START_OFFSET_NAME = "log-start-offset"
CLEANER_OFFSET_NAME = "cleaner-offset"
VERSION = "v2"  # with a CRC line
UNCHECKED_VERSION = "v1"  # read, without a CRC line, as a hint only
CRC_LABEL = "crc32c"

logger = logging.getLogger(__name__)


class RecoveryPoint(NamedTuple):
    segment_base_offset: int  # the segment the position is in
    position: int  # byte position in that segment: everything before it was fsynced
    next_offset: int  # base offset of the batch at ``position``


def _encode(kind: str, fields: dict[str, int], digits: int = 0) -> bytes:
    """``digits``: each value zero-padded to that many (a mark rewritten in place keeps
    one length)."""
    lines = [f"{kind} {VERSION}", *(f"{name} {value:0{digits}d}" for name, value in fields.items())]
    body = ("\n".join(lines) + "\n").encode("ascii")
    return body + f"{CRC_LABEL} {crc32c(body):08x}\n".encode("ascii")


class _Decoded(NamedTuple):
    values: dict[str, int]
    verified: bool  # v2 with a matching CRC (else a v1 file: a hint)


def _decode(
    path: Path, kind: str, names: tuple[str, ...], in_place: bool = False
) -> _Decoded | None:
    """The file's values, or None (missing, or damaged: a warning says how). ``in_place``:
    a file rewritten in place (``in_place_file``), read again while it does not parse or
    its CRC does not match (a read that met a rewrite), a bounded number of times."""

    def read() -> _Read:
        return _Read(_read_parsed(path, kind, names))

    answer = read_consistent(read, _Read.parsed) if in_place else read()
    if isinstance(answer.result, str):
        logger.warning(answer.result)
        return None
    return answer.result


@dataclass(frozen=True)
class _Read:
    """A read of a checkpoint: its values, no file (None), or the warning of one that did
    not parse."""

    result: _Decoded | str | None

    def parsed(self) -> bool:
        return not isinstance(self.result, str)


def _read_parsed(path: Path, kind: str, names: tuple[str, ...]) -> _Decoded | str | None:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    return _parse(raw, path, kind, names)


def _parse(raw: bytes, path: Path, kind: str, names: tuple[str, ...]) -> _Decoded | str:
    """The values of a checkpoint's bytes, or the warning that says why it is ignored."""
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        return f"checkpoint {path} is not ASCII text; ignoring it"
    lines = text.split("\n")
    verified = lines[0] == f"{kind} {VERSION}"
    if verified:
        # lines[-1] is "" after the final LF; lines[-2] is the CRC line.
        crc_line = lines[-2] if len(lines) >= 2 else ""
        body_bytes = len(raw) - len(crc_line) - 1
        label, _, stored = crc_line.partition(" ")
        if lines[-1] or label != CRC_LABEL or len(stored) != 8:
            return f"checkpoint {path} has no CRC line; ignoring it"
        actual = f"{crc32c(raw[:body_bytes]):08x}"
        if stored != actual:
            return (
                f"checkpoint {path}: CRC mismatch (file says {stored}, contents give "
                f"{actual}); ignoring it"
            )
        lines = [*lines[:-2], ""]
        expected_first = f"{kind} {VERSION}"
    else:
        expected_first = f"{kind} {UNCHECKED_VERSION}"
    if len(lines) != len(names) + 2 or lines[0] != expected_first or lines[-1]:
        return f"checkpoint {path} does not have the layout {kind!r}; ignoring it"
    values: dict[str, int] = {}
    for name, line in zip(names, lines[1:-1], strict=True):
        label, _, number = line.partition(" ")
        if label != name or not number.isdigit() or not number.isascii():
            return f"checkpoint {path}: line {line!r} is not '{name} <integer>'; ignoring it"
        values[name] = int(number)
    return _Decoded(values, verified)


def write_recovery_point(directory: Path, point: RecoveryPoint) -> None:
    replace_file(directory / RECOVERY_POINT_NAME, _encode(RECOVERY_POINT_NAME, point._asdict()))


def try_write_recovery_point(directory: Path, point: RecoveryPoint) -> bool:
    """Write ``point`` if the disk lets us; False (and a warning) if it does not.

    Moving a recovery point forward is an optimisation: when the write fails
    (a full disk) the older point stays, still true, and the next open scans more.
    """
    try:
        write_recovery_point(directory, point)
    except (OSError, DiskFullError) as error:
        logger.warning(
            "%s: could not write the recovery point (%s); keeping the older one, so the "
            "next open rescans from it",
            directory,
            error,
        )
        return False
    return True


def retract_recovery_point(directory: Path, point: RecoveryPoint) -> None:
    """Move the recovery point back to ``point`` (before a truncation): it must not stay ahead.

    On a full disk the file is deleted instead (that needs no space): a missing
    recovery point costs the next open a scan of every segment, never a byte.
    """
    try:
        write_recovery_point(directory, point)
    except DiskFullError as error:
        logger.warning(
            "%s: could not move the recovery point back (%s); deleted it instead, so the "
            "next open scans the whole log",
            directory,
            error,
        )
        (directory / RECOVERY_POINT_NAME).unlink(missing_ok=True)
        fsync_directory(directory)


def read_recovery_point(directory: Path) -> RecoveryPoint | None:
    return read_recovery_point_checked(directory)[0]


def read_recovery_point_checked(directory: Path) -> tuple[RecoveryPoint | None, bool]:
    """(recovery point or None, whether its CRC proved it: v2 and intact)."""
    decoded = _decode(directory / RECOVERY_POINT_NAME, RECOVERY_POINT_NAME, RecoveryPoint._fields)
    if decoded is None:
        return None, False
    return RecoveryPoint(**decoded.values), decoded.verified


def write_log_start_offset(directory: Path, log_start_offset: int) -> None:
    replace_file(
        directory / LOG_START_OFFSET_NAME,
        _encode(LOG_START_OFFSET_NAME, {"log_start_offset": log_start_offset}),
    )


def read_log_start_offset(directory: Path) -> int | None:
    decoded = _decode(
        directory / LOG_START_OFFSET_NAME, LOG_START_OFFSET_NAME, ("log_start_offset",)
    )
    return None if decoded is None else decoded.values["log_start_offset"]


def write_cleaner_offset(directory: Path, first_dirty_offset: int) -> None:
    replace_file(
        directory / CLEANER_OFFSET_NAME,
        _encode(CLEANER_OFFSET_NAME, {"first_dirty_offset": first_dirty_offset}),
    )


def read_cleaner_offset(directory: Path) -> int | None:
    decoded = _decode(directory / CLEANER_OFFSET_NAME, CLEANER_OFFSET_NAME, ("first_dirty_offset",))
    return None if decoded is None else decoded.values["first_dirty_offset"]


class AppendState(NamedTuple):
    sequence: int  # changes with every start and finish of an append_all_as_leader
    in_progress: int  # 1 while an append_all_as_leader writes its batches, else 0
    first_offset: int  # where the append_all_as_leader in progress (or the last one) started


NO_APPEND = AppendState(0, 0, 0)


def write_append_state(directory: Path, state: AppendState) -> None:
    """Rewrite the mark in place, every value in 20 digits (no fsync: see the module
    text). DiskFullError on a full disk."""
    write_in_place(
        directory / APPEND_STATE_NAME,
        _encode(APPEND_STATE_NAME, state._asdict(), digits=APPEND_STATE_DIGITS),
    )


def read_append_state(directory: Path) -> AppendState | None:
    decoded = _decode(
        directory / APPEND_STATE_NAME, APPEND_STATE_NAME, AppendState._fields, in_place=True
    )
    return None if decoded is None else AppendState(**decoded.values)
