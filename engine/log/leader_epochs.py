"""A log's leader epochs: which epoch appended which offsets (Kafka's leader epoch cache).

Every batch a log appends carries the leader epoch it was appended under
(``partition_leader_epoch``, stamped by ``DataLog``); this cache keeps, per epoch,
the offset of its first batch, so that a replica can ask "where did epoch e end?"
(KIP-101/279) without scanning the log. It is what epoch-based truncation of a
divergent suffix rests on.

File ``leader-epoch-checkpoint`` in the log directory, Kafka's text format:

    0                 version
    2                 number of entries
    0 0               epoch start_offset, epochs and start offsets increasing
    1 4711

It is replaced atomically (``replace_file``) whenever an entry is added or removed.
A missing or damaged file (unparsable, wrong version or count, entries not
increasing) is rebuilt from the epochs of the log's batch headers (the first batch
of each higher epoch starts it), and the result written back: the batches are the
truth, the file is their summary. On open, entries at or past the log end (a crash
between a truncation and this file) are dropped, and the first entry is moved up to
the log start offset.
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from collections.abc import Callable, Iterable
from itertools import pairwise
from pathlib import Path
from typing import NamedTuple

from twinlog.engine.base.atomic_file import replace_file
from twinlog.engine.records.batch_format import NO_PARTITION_LEADER_EPOCH, BatchHeader

logger = logging.getLogger(__name__)

LEADER_EPOCH_CHECKPOINT_NAME = "leader-epoch-checkpoint"
CHECKPOINT_VERSION = 0
NO_EPOCH = NO_PARTITION_LEADER_EPOCH  # Kafka's UNDEFINED_EPOCH
NO_EPOCH_OFFSET = -1  # Kafka's UNDEFINED_EPOCH_OFFSET


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class EpochEnd(NamedTuple):
    """Answer to "where did ``epoch`` end?": the largest known epoch <= it, and its end."""

    epoch: int
    end_offset: int


def encode_checkpoint(entries: Iterable[EpochEntry]) -> bytes:
    lines = [f"{epoch} {start_offset}" for epoch, start_offset in entries]
    return "\n".join([str(CHECKPOINT_VERSION), str(len(lines)), *lines, ""]).encode("ascii")


def decode_checkpoint(contents: bytes) -> list[EpochEntry]:
    """The entries of a checkpoint file; ValueError naming what is wrong with it."""
    lines = contents.decode("ascii").splitlines()
    if len(lines) < 2 or lines[0].strip() != str(CHECKPOINT_VERSION):
        raise ValueError(f"expected version line {CHECKPOINT_VERSION}, found {lines[:1]}")
    count = int(lines[1])
    if count != len(lines) - 2:
        raise ValueError(f"count line says {count} entries, the file holds {len(lines) - 2}")
    entries = []
    for line in lines[2:]:
        epoch, start_offset = line.split()
        entries.append(EpochEntry(int(epoch), int(start_offset)))
    _check_increasing(entries)
    return entries


def _check_increasing(entries: list[EpochEntry]) -> None:
    for earlier, later in pairwise(entries):
        if not (earlier.epoch < later.epoch and earlier.start_offset <= later.start_offset):
            raise ValueError(f"entries must increase: {earlier} then {later}")
    if entries and (entries[0].epoch < 0 or entries[0].start_offset < 0):
        raise ValueError(f"negative epoch or offset: {entries[0]}")


def entries_from_headers(headers: Iterable[BatchHeader]) -> list[EpochEntry]:
    """Rebuild the entries from a log's batch headers, in log order."""
    entries: list[EpochEntry] = []
    for header in headers:
        epoch = header.partition_leader_epoch
        if epoch > (entries[-1].epoch if entries else NO_EPOCH):
            entries.append(EpochEntry(epoch, header.base_offset))
    return entries


class LeaderEpochCache:
    """The epochs of one log, kept in its ``leader-epoch-checkpoint`` file.

    Thread rule: called by the log's writer under its write lock (``assign``, the
    truncations), read by any thread (each answer reads one list, replaced whole).
    """

    def __init__(self, directory: Path, entries: list[EpochEntry]) -> None:
        _check_increasing(entries)
        self.path = directory / LEADER_EPOCH_CHECKPOINT_NAME
        self._entries = tuple(entries)

    @classmethod
    def load(
        cls,
        directory: Path,
        log_start_offset: int,
        log_end_offset: int,
        headers_from_start: Callable[[], Iterable[BatchHeader]],
    ) -> LeaderEpochCache:
        """The cache of the log in ``directory``, rebuilt from its headers if need be."""
        path = directory / LEADER_EPOCH_CHECKPOINT_NAME
        entries: list[EpochEntry] | None = None
        try:
            entries = decode_checkpoint(path.read_bytes())
        except FileNotFoundError:
            if log_end_offset > log_start_offset:
                logger.warning("%s is missing: rebuilding it from the batches", path)
        except (ValueError, UnicodeDecodeError) as error:
            logger.warning("%s is damaged (%s): rebuilding it from the batches", path, error)
        rebuilt = entries is None
        if entries is None:
            entries = entries_from_headers(headers_from_start())
        cache = cls(directory, entries)
        # An epoch that starts exactly at the log end is kept: a leader records its epoch at
        # the log end when it takes over (KIP-279's fix), before it appends anything, and the
        # log's leader epoch comes from here at the next open: dropping it would let the
        # epoch go back, and a deposed caller's older epoch pass the checks.
        changed = cache._truncated_from_end(log_end_offset + 1)
        changed = cache._truncated_from_start(log_start_offset) or changed
        if rebuilt or changed:
            cache._write()
        return cache

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        return self._entries

    @property
    def latest_epoch(self) -> int:
        """The highest epoch known, or NO_EPOCH."""
        entries = self._entries
        return entries[-1].epoch if entries else NO_EPOCH

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (a new leader's log end, or the
        first batch appended under it). A known epoch is a no-op; an older one, or a start
        below the latest epoch's, raises ValueError (the caller's bug: epochs only grow)."""
        entries = self._entries
        if entries and epoch == entries[-1].epoch:
            return
        if entries and (epoch < entries[-1].epoch or start_offset < entries[-1].start_offset):
            raise ValueError(
                f"leader epoch {epoch} at offset {start_offset} does not follow the latest "
                f"one, epoch {entries[-1].epoch} from offset {entries[-1].start_offset}"
            )
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"leader epoch {epoch} at offset {start_offset}: both must be >= 0")
        self._entries = (*entries, EpochEntry(epoch, start_offset))
        self._write()

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch that appended ``offset`` (NO_EPOCH if it lies before the first entry)."""
        entries = self._entries
        number = bisect_right([entry.start_offset for entry in entries], offset) - 1
        return entries[number].epoch if number >= 0 else NO_EPOCH

    def end_offset_for_epoch(self, epoch: int, log_end_offset: int) -> EpochEnd:
        """KIP-101/279: for the largest known epoch <= ``epoch``, the offset after its last
        record, i.e. the start offset of the next higher epoch, or the log end for the
        latest. (NO_EPOCH, NO_EPOCH_OFFSET) when ``epoch`` is older than every entry."""
        entries = self._entries
        number = bisect_right([entry.epoch for entry in entries], epoch) - 1
        if number < 0:
            return EpochEnd(NO_EPOCH, NO_EPOCH_OFFSET)
        if number == len(entries) - 1:
            return EpochEnd(entries[number].epoch, log_end_offset)
        return EpochEnd(entries[number].epoch, entries[number + 1].start_offset)

    def truncate_from_end(self, offset: int) -> None:
        """The log was cut back to ``offset``: forget epochs that started at or after it."""
        if self._truncated_from_end(offset):
            self._write()

    def truncate_from_start(self, offset: int) -> None:
        """The log now starts at ``offset``: forget epochs that ended before it, and let the
        one holding it start there (as Kafka's cache does)."""
        if self._truncated_from_start(offset):
            self._write()

    def clear(self) -> None:
        """The log was emptied (a follower restarting at its leader's log start)."""
        if self._entries:
            self._entries = ()
            self._write()

    def _truncated_from_end(self, offset: int) -> bool:
        kept = tuple(entry for entry in self._entries if entry.start_offset < offset)
        changed = kept != self._entries
        self._entries = kept
        return changed

    def _truncated_from_start(self, offset: int) -> bool:
        entries = self._entries
        number = bisect_right([entry.start_offset for entry in entries], offset) - 1
        if number < 0 or (number == 0 and entries[0].start_offset == offset):
            return False
        self._entries = (EpochEntry(entries[number].epoch, offset), *entries[number + 1 :])
        return True

    def _write(self) -> None:
        replace_file(self.path, encode_checkpoint(self._entries))
