"""Compare the data log from a copy's start offset with the journal's batches.

A batch copied from the journal is recognisable in the log without reading
its records: the log only patched its base offset and partition leader epoch
(both outside the CRC), so every other header field is the same (length, CRC,
producer id / generation / base sequence, record count, ...), and the CRC stands
for the rest of the bytes. The transaction is not a batch field: two batches
are told apart by their bytes, which the CRC covers.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from twinlog.copier.recovery_table import TailState
from twinlog.engine.records.batch_format import BatchHeader


def same_batch(in_log: BatchHeader, in_journal: BatchHeader) -> bool:
    """True if the log's batch is the journal's (all but base offset and epoch match)."""
    return in_log._replace(base_offset=0, partition_leader_epoch=0) == in_journal._replace(
        base_offset=0, partition_leader_epoch=0
    )


def classify_tail(
    start_offset: int,
    log_start_offset: int,
    log_end_offset: int,
    log_headers: Iterable[BatchHeader],
    journal_headers: Iterator[BatchHeader],
) -> tuple[TailState, int]:
    """(tail state, whole batches of ours found) of the log from ``start_offset``.

    TORN: a batch of ours reaches past ``log_end_offset`` (the data log's recovery
    cuts such a batch at open, so this is a guard, not a path taken).

    ``log_headers`` are the log's headers from ``start_offset`` (or from
    ``log_start_offset`` if retention deleted the copy's start) to its end;
    ``journal_headers`` the transaction's batches in append order. Reads each
    side at most once, one header at a time.
    """
    if start_offset > log_end_offset:
        return TailState.BEYOND, 0
    if start_offset >= log_start_offset:
        return _match(start_offset, log_headers, journal_headers, log_end_offset)
    # Retention deleted the copy's first segments (older versions did not bound it by
    # the APPLYING copy). The journal's batches below the log start are passed over by
    # the offsets they span; the rest must match the log from its start. Only a whole
    # copy is recognised so (a prefix could not be cut back to a start that is gone).
    expected_offset, skipped = _skip_deleted(journal_headers, start_offset, log_start_offset)
    if expected_offset != log_start_offset:
        return TailState.FOREIGN, 0
    state, matched = _match(expected_offset, log_headers, journal_headers, log_end_offset)
    if state is not TailState.WHOLE:
        return TailState.FOREIGN, 0
    return TailState.WHOLE, skipped + matched


def _skip_deleted(
    journal_headers: Iterator[BatchHeader], start_offset: int, log_start_offset: int
) -> tuple[int, int]:
    """(offset after the journal batches that lie wholly below the log start, how many)."""
    expected_offset, skipped = start_offset, 0
    while expected_offset < log_start_offset:
        in_journal = next(journal_headers, None)
        if in_journal is None:
            break
        expected_offset += in_journal.last_offset_delta + 1
        skipped += 1
    return expected_offset, skipped


def _match(
    expected_offset: int,
    log_headers: Iterable[BatchHeader],
    journal_headers: Iterator[BatchHeader],
    log_end_offset: int | None = None,
) -> tuple[TailState, int]:
    matched = 0
    for in_log in log_headers:
        in_journal = next(journal_headers, None)
        if (
            in_journal is None
            or in_log.base_offset != expected_offset
            or not same_batch(in_log, in_journal)
        ):
            return TailState.FOREIGN, matched
        if log_end_offset is not None and in_log.next_offset > log_end_offset:
            return TailState.TORN, matched  # ours, but the log ends inside it
        matched += 1
        expected_offset = in_log.next_offset
    if next(journal_headers, None) is None:
        return TailState.WHOLE, matched
    return (TailState.EMPTY if matched == 0 else TailState.PREFIX), matched
