"""A log's high watermark: the end of what a consumer may read (CLUSTER.md section 3.3, I1).

Offsets below the high watermark (HW) are committed: every replica holds them.
Consumers (fetch, its long poll, ``list_offset("latest")``, a Spark scan) read up
to the HW, never past it; the writer, the copier and recovery read the whole log.

    log_start_offset <= value <= log_end_offset     asserted on every change

``advance_to`` never lowers the value (a lower offset is a late report, ignored);
only ``truncate_to``, beside a truncation of the log, does. On one node the
partition advances the HW to the log end after every append; replication will
advance it to what every in-sync replica holds instead.

Readers of the files (``read_only.LogReader``: no broker, no memory to share) see
the HW through the ``high-watermark`` file, written only while the HW lies below
the log end; once it catches up the file says "the log end" (``LOG_END``), as a
missing file does. So on one node, where the HW trails the log end only for the
instant between an append and its advance, there is no file and it costs nothing.
It is not fsynced: it bounds readers of a live broker, and a restart rebuilds the HW
from the log. It is written only when what it says changes (a value, or "the log
end"): a leader calls ``advance_to`` after every append, mostly without moving the HW.
On a cluster it changes with nearly every fetch round of every partition, so it is
rewritten in place (``in_place_file``: one ``pwrite`` of a value padded to 20 digits,
not a rename and an unlink per change), and its reader reads it again while it is
damaged (a read that met a rewrite).

Thread rule: any thread; one lock orders the changes and the file.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Protocol

from twinlog.engine.base.crc32c import crc32c
from twinlog.engine.base.errors import DiskFullError
from twinlog.engine.base.in_place_file import read_consistent, write_in_place
from twinlog.engine.records.batch_format import read_header

log = logging.getLogger(__name__)

HIGH_WATERMARK_FILE = "high-watermark"
_LABEL = "high_watermark"
LOG_END = 2**63 - 1  # what the file says once the HW reached the log end: no bound
DIGITS = 20  # every value padded so: the file keeps one length, rewritten in place


class LogBounds(Protocol):
    """What the HW is checked against (a ``DataLog``)."""

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...


class HighWatermark:
    def __init__(self, bounds: LogBounds, directory: Path, start_below: int | None = None) -> None:
        """Start at the log end: after recovery everything the log holds is committed
        (one node), except from ``start_below`` on when given (a copy whose finish was
        deferred: its batches already in the log are not readable until it is done).
        The file of an earlier run says nothing about this one: removed."""
        self._bounds = bounds
        self._path = directory / HIGH_WATERMARK_FILE
        self._lock = threading.Lock()
        end = bounds.log_end_offset
        self._value = (
            end if start_below is None else max(bounds.log_start_offset, min(end, start_below))
        )
        # What the file says: an offset, or None for "no file" (the log end). Not known
        # at start (or after a failed write): whatever is there is removed or replaced.
        self._file_value: int | None = None
        self._file_known = False
        self._publish_locked()

    @property
    def value(self) -> int:
        """The first offset a consumer may not read."""
        return self._value

    def advance_to(self, offset: int) -> int:
        """Raise the HW to ``offset`` (ignored if not higher); the value after."""
        with self._lock:
            start, end = self._bounds.log_start_offset, self._bounds.log_end_offset
            assert offset <= end, f"high watermark {offset} past the log end {end}"
            if offset > self._value:
                self._value = offset
            assert start <= self._value <= end, (start, self._value, end)
            self._publish_locked()
            return self._value

    def truncate_to(self, offset: int) -> None:
        """Lower the HW with a truncation of the log to ``offset`` (the only way down)."""
        with self._lock:
            if offset < self._value:
                self._value = offset
            self._publish_locked()

    def _publish_locked(self) -> None:
        """Write the file while the HW trails the log end; once it does not, the file
        (if any) says so."""
        behind = self._value < self._bounds.log_end_offset
        if behind:
            self._write_file_locked(self._value)
        elif not self._file_known:  # at start: an earlier run's file says nothing now
            self._path.unlink(missing_ok=True)
            self._file_value, self._file_known = None, True
        elif self._file_value is not None:
            self._write_file_locked(LOG_END)

    def _write_file_locked(self, value: int) -> None:
        if self._file_known and self._file_value == value:
            return  # says so already
        try:
            write_in_place(self._path, encode_high_watermark(value))
        except DiskFullError as error:
            # Broker reads are bounded by the value in memory; only readers of the files
            # (Spark's direct path) use the file, and they may see the batches above the
            # HW until space returns. Refusing to open or append over it would be worse.
            log.warning("%s not written (%s): file readers may read past it", self._path, error)
            self._file_known = False  # written again next time
            return
        # LOG_END says what no file says: the next catch-up writes nothing
        self._file_value, self._file_known = (None if value == LOG_END else value), True


def encode_high_watermark(offset: int) -> bytes:
    body = f"{_LABEL} {offset:0{DIGITS}d}\n".encode("ascii")
    return body + f"crc32c {crc32c(body):08x}\n".encode("ascii")


def read_high_watermark(directory: Path) -> int | None:
    """The HW a live broker published for the log in ``directory``; None: the log end.

    A file read while the broker rewrote it may not parse: it is read again. One damaged
    for good reads as 0, so a reader sees too little rather than uncommitted data.
    """
    path = directory / HIGH_WATERMARK_FILE
    answer = read_consistent(lambda: _read_file(path), lambda read: read != _DAMAGED)
    if answer == _DAMAGED:
        log.warning("%s is damaged; reading the log as empty", path)
        return 0
    return None if answer == LOG_END else answer


_DAMAGED = -1  # not an offset


def _read_file(path: Path) -> int | None:
    """The file's value, None if there is none, _DAMAGED if it does not parse."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    body_bytes = raw.find(b"\n") + 1
    body = raw[:body_bytes]
    label, _, number = body.decode("ascii", "replace").strip().partition(" ")
    if (
        body_bytes == 0
        or label != _LABEL
        or not (number.isascii() and number.isdigit())
        or raw[body_bytes:] != f"crc32c {crc32c(body):08x}\n".encode("ascii")
    ):
        return _DAMAGED
    return int(number)


def batches_below(records: bytes, limit_offset: int) -> bytes:
    """The whole batches of ``records`` (as ``DataLog.read`` returns them) that end at or
    before ``limit_offset``: a read cut at the high watermark."""
    position = 0
    while position < len(records):
        header = read_header(records, position)
        if header.next_offset > limit_offset:
            break
        position += header.size_bytes
    return records if position == len(records) else records[:position]
