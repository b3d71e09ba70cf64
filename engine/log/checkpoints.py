"""The two checkpoint files of a data log: small text files, replaced atomically.

    checkpoint = kind " v1" LF *(field " " decimal-integer LF)

    recovery-point v1                 log-start-offset v1
    segment_base_offset 0             log_start_offset 1200
    position 4096
    next_offset 120

``recovery-point`` promises: every byte before ``position`` of segment
``segment_base_offset``, every byte of earlier segments, and the index entries
of all of them, were fsynced when the file was written; the batch at
``position`` (if any) has base offset ``next_offset``. Recovery scans only what
lies after it. It is written when a segment rolls (pointing at the start of
the new segment), every ``RECOVERY_POINT_INTERVAL_BYTES`` of flushed appends,
after recovery, after truncate_to, and on close (pointing at the log end, so a
cleanly closed log is not scanned at all).

``log-start-offset`` is the first offset still stored. Retention writes it
*before* deleting segment files, so a crash in between leaves segments that the
next open deletes instead of serving again.

A file that is missing, or that does not parse, reads as None: the caller
falls back to the conservative choice (scan everything; start at the first
segment) and says so in the log.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import NamedTuple

from engine.log.files import write_file_atomically

RECOVERY_POINT_NAME = "recovery-point"
LOG_START_OFFSET_NAME = "log-start-offset"
VERSION = "v1"

logger = logging.getLogger(__name__)


class RecoveryPoint(NamedTuple):
    segment_base_offset: int  # the segment the position is in
    position: int  # byte position in that segment: everything before it was fsynced
    next_offset: int  # base offset of the batch at ``position``


def _encode(kind: str, fields: dict[str, int]) -> bytes:
    lines = [f"{kind} {VERSION}", *(f"{name} {value}" for name, value in fields.items())]
    return ("\n".join(lines) + "\n").encode("ascii")


def _decode(path: Path, kind: str, names: tuple[str, ...]) -> dict[str, int] | None:
    try:
        text = path.read_bytes().decode("ascii")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        logger.warning("checkpoint %s is not ASCII text; ignoring it", path)
        return None
    lines = text.split("\n")
    expected_lines = [f"{kind} {VERSION}", *(f"{name} " for name in names), ""]
    if len(lines) != len(expected_lines) or lines[0] != expected_lines[0] or lines[-1]:
        logger.warning("checkpoint %s does not have the layout %r; ignoring it", path, kind)
        return None
    values: dict[str, int] = {}
    for name, line in zip(names, lines[1:-1], strict=True):
        label, _, number = line.partition(" ")
        if label != name or not number.isdigit():
            logger.warning(
                "checkpoint %s: line %r is not '%s <integer>'; ignoring it", path, line, name
            )
            return None
        values[name] = int(number)
    return values


def write_recovery_point(directory: Path, point: RecoveryPoint) -> None:
    write_file_atomically(
        directory / RECOVERY_POINT_NAME, _encode(RECOVERY_POINT_NAME, point._asdict())
    )


def read_recovery_point(directory: Path) -> RecoveryPoint | None:
    values = _decode(directory / RECOVERY_POINT_NAME, RECOVERY_POINT_NAME, RecoveryPoint._fields)
    return None if values is None else RecoveryPoint(**values)


def write_log_start_offset(directory: Path, log_start_offset: int) -> None:
    write_file_atomically(
        directory / LOG_START_OFFSET_NAME,
        _encode(LOG_START_OFFSET_NAME, {"log_start_offset": log_start_offset}),
    )


def read_log_start_offset(directory: Path) -> int | None:
    values = _decode(
        directory / LOG_START_OFFSET_NAME, LOG_START_OFFSET_NAME, ("log_start_offset",)
    )
    return None if values is None else values["log_start_offset"]
