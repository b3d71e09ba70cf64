"""Producer-state snapshots: a partition's idempotence table as of an offset, so that an
open after a crash scans only the log after the newest snapshot, not all of it.

A snapshot at offset X holds what ``SequenceTracker.observe`` learnt from the batches
below X. The partition writes one every ``SNAPSHOT_INTERVAL_BYTES`` of log (as Kafka
writes one per segment, but within a segment too: a segment is 1 GiB by default, and
scanning one costs about 1.7 s) and at a clean close; it keeps the newest
``SNAPSHOTS_KEPT``. One file each, ``producer-state-<X, 20 digits>.json``: JSON, then
the CRC-32C line of ``atomic_file.with_checksum``:

    {"offset": X, "last_batch": [base offset, CRC] | null,
     "producers": {"<id>": [generation, last timestamp ms, [[base sequence, count,
                                                             base offset], ...]]}}

``last_batch`` names the batch that ends at X (null: nothing below X). A snapshot is
used only if that batch is still in the log, at that offset, with that CRC: a log cut
below X (a follower's truncation, a torn tail recovered, a copy undone) and written
again never lets an older history's snapshot answer for the new one, whichever path
cut it. A snapshot that fails this, or its checksum, or lies outside the log, is
skipped (the next older one is tried, then a scan from the log start) and deleted: the
log is the truth, a snapshot only saves reading it.

``producer-state.json`` (the clean-close snapshot before these, with
``log_end_offset`` and no ``last_batch``) is still read once, for the open after an
upgrade, and then removed.

Thread rule: the partition calls these under its ``_plain_lock`` (the table's lock).
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from twinlog.engine.base.atomic_file import read_checked, replace_file, with_checksum
from twinlog.engine.base.errors import CorruptLogError, TwinlogError
from twinlog.engine.broker.producer_state import ProducerSequences, SequenceTracker
from twinlog.engine.log import DataLog
from twinlog.engine.records.batch_format import BatchHeader

log = logging.getLogger(__name__)

LEGACY_SNAPSHOT_FILE = "producer-state.json"
SNAPSHOT_NAME = re.compile(r"producer-state-(\d{20})\.json")
SNAPSHOT_INTERVAL_BYTES = 64 * 1024 * 1024  # of log between snapshots: a scan of ~0.1 s
SNAPSHOTS_KEPT = 2


@dataclass(frozen=True)
class Snapshot:
    """A snapshot read back: the table as of ``offset``, and the batch that ends there."""

    offset: int
    tracker: SequenceTracker
    last_batch: tuple[int, int] | None  # (base offset, CRC); None: nothing below offset
    path: Path


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"producer-state-{offset:020d}.json"


def encode(tracker: SequenceTracker, offset: int, last_batch: BatchHeader | None) -> bytes:
    """The file's bytes: the table as of ``offset``, ``last_batch`` the batch ending there."""
    assert last_batch is None or last_batch.next_offset == offset, (last_batch, offset)
    document = {
        "offset": offset,
        "last_batch": None if last_batch is None else [last_batch.base_offset, last_batch.crc],
        "producers": {
            str(producer_id): [
                sequences.producer_generation,
                sequences.last_timestamp_ms,
                [list(item) for item in sequences.recent],
            ]
            for producer_id, sequences in tracker.producers.items()
        },
    }
    return with_checksum(json.dumps(document).encode())


def decode(raw: bytes, path: Path) -> Snapshot:
    """One snapshot's bytes (checked); ValueError if damaged or not a snapshot."""
    try:
        document = json.loads(raw)
        tracker = SequenceTracker()
        for producer_id, (generation, last_timestamp_ms, recent) in document["producers"].items():
            sequences = ProducerSequences(int(generation), last_timestamp_ms=int(last_timestamp_ms))
            for base_sequence, count, base_offset in recent:
                sequences.recent.append((int(base_sequence), int(count), int(base_offset)))
            tracker.producers[int(producer_id)] = sequences
        if "offset" in document:  # this format
            last_batch = document["last_batch"]
            named = None if last_batch is None else (int(last_batch[0]), int(last_batch[1]))
            return Snapshot(int(document["offset"]), tracker, named, path)
        # the clean-close snapshot before this format: nothing to check it against
        return Snapshot(int(document["log_end_offset"]), tracker, None, path)
    except (KeyError, TypeError, IndexError) as error:
        raise ValueError(f"not a producer-state snapshot ({error!r})") from None


def write(directory: Path, tracker: SequenceTracker, offset: int, last: BatchHeader | None) -> None:
    """Write the snapshot at ``offset`` (durably: it replaces a scan a crash would need),
    then delete all but the newest ``SNAPSHOTS_KEPT``."""
    replace_file(snapshot_path(directory, offset), encode(tracker, offset, last))
    for old in sorted(_snapshot_files(directory), reverse=True)[SNAPSHOTS_KEPT:]:
        old[1].unlink(missing_ok=True)


def _snapshot_files(directory: Path) -> list[tuple[int, Path]]:
    found = []
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    for name in names:
        matched = SNAPSHOT_NAME.fullmatch(name)
        if matched:
            found.append((int(matched.group(1)), directory / name))
    return found


def read_newest_first(directory: Path) -> list[Snapshot | Path]:
    """Every snapshot in ``directory``, newest first (the legacy one last); a file that
    cannot be read or decoded comes as its path alone, for the caller to delete."""
    candidates = [path for _, path in sorted(_snapshot_files(directory), reverse=True)]
    legacy = directory / LEGACY_SNAPSHOT_FILE
    if legacy.exists():
        candidates.append(legacy)
    snapshots: list[Snapshot | Path] = []
    for path in candidates:
        try:
            snapshots.append(decode(read_checked(path), path))
        except (OSError, ValueError) as error:
            log.warning(
                "%s: producer-state snapshot ignored (%s); the log is read instead", path, error
            )
            snapshots.append(path)
    return snapshots


class ProducerSnapshots:
    """One partition's snapshots against its data log: ``load`` at open, ``after_append``
    after every batch the table observed (and every copy), ``write_now`` at close.
    Called under the partition's ``_plain_lock``."""

    def __init__(self, name: str, directory: Path, data_log: DataLog) -> None:
        self.name = name
        self.directory = directory
        self.log = data_log
        self._size_bytes_at_last = 0  # the log's size when the newest snapshot was written

    def load(self) -> SequenceTracker:
        """The table as the log holds it: the newest snapshot that matches the log, then
        ``observe`` every batch after it (all of them if none matches)."""
        start, end = self.log.log_start_offset, self.log.log_end_offset
        chosen: Snapshot | None = None
        for candidate in read_newest_first(self.directory):
            if isinstance(candidate, Path):  # unreadable: warned about, of no use
                candidate.unlink(missing_ok=True)
                continue
            legacy = candidate.path.name == LEGACY_SNAPSHOT_FILE
            if chosen is None and self._matches_log(candidate, start, end, legacy):
                chosen = candidate
            elif chosen is None:
                log.info(
                    "%s: producer-state snapshot %s does not match the log (a history cut "
                    "and written again, or segments removed): skipped and deleted",
                    self.name,
                    candidate.path.name,
                )
                candidate.path.unlink(missing_ok=True)
            if legacy:  # read once, after an upgrade; this format replaces it
                candidate.path.unlink(missing_ok=True)
        tracker = chosen.tracker if chosen is not None else SequenceTracker()
        scan_from = chosen.offset if chosen is not None else start
        if scan_from < end:
            for header in self.log.iter_headers(scan_from):
                tracker.observe(header, header.base_offset)
        self._size_bytes_at_last = self.log.size_bytes()
        return tracker

    def _matches_log(self, snapshot: Snapshot, start: int, end: int, legacy: bool) -> bool:
        if not start <= snapshot.offset <= end:
            return False
        if snapshot.last_batch is None:
            # Nothing below its offset; the legacy format named no batch (as it was read)
            return legacy or snapshot.offset == start
        base_offset, crc = snapshot.last_batch
        if base_offset < start:
            return False  # retention removed the batch it names: it cannot be checked
        try:
            header = next(iter(self.log.iter_headers(base_offset)), None)
        except CorruptLogError:
            return False  # the scan from the log start meets it and says so
        return (
            header is not None
            and header.base_offset == base_offset
            and header.crc == crc
            and base_offset + header.last_offset_delta + 1 == snapshot.offset
        )

    def after_append(self, tracker: SequenceTracker) -> None:
        """A snapshot once the log grew ``SNAPSHOT_INTERVAL_BYTES`` since the last one."""
        size_bytes = self.log.size_bytes()
        if size_bytes - self._size_bytes_at_last < SNAPSHOT_INTERVAL_BYTES:
            return
        self._size_bytes_at_last = size_bytes  # a failed write is not retried at every append
        self.write_now(tracker)

    def write_now(self, tracker: SequenceTracker) -> None:
        """A snapshot at the end of the log's last batch (a copy's or this table's: the
        table holds every plain batch below it). Failing to write one only costs a longer
        scan at the next open after a crash: warned about, never raised."""
        last = self.log.last_batch_header()
        offset = self.log.log_start_offset if last is None else last.next_offset
        try:
            write(self.directory, tracker, offset, last)
        except (OSError, TwinlogError) as error:
            log.warning(
                "%s: producer-state snapshot at offset %d not written (%s); an open after a "
                "crash reads more of the log instead",
                self.name,
                offset,
                error,
            )
