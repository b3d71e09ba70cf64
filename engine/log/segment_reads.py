"""Reads of a data log by offset: what its readers may see, and how they find and check
batches in it.

The segment list (segment_list.py) publishes a ``Published`` after each change, replaced
whole by one attribute store. A reader takes the one that is current when it starts and
reads with ``os.pread`` up to its end position, so it sees whole batches only, never one
being written. The functions here are those reads, called by the segment list (for
``DataLog.read``, ``iter_headers`` and ``offset_for_timestamp``); ``find_batch`` also
serves its truncation, which must cut at a batch boundary.

Bytes this process has not checked yet (those before the recovery point when the log
was opened) are checked on their first read, CRC and offsets, and remembered as checked
(checked_ranges.py), so the next reader of them pays nothing. Indexes are derived data:
a wrong entry costs one rebuild of the segment's indexes (``RebuildIndex``, which the
segment list does under its write lock) and a second lookup.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterator
from functools import partial
from typing import NamedTuple, TypeVar

from twinlog.engine.base.errors import CorruptBatchError, CorruptLogError, OffsetOutOfRangeError
from twinlog.engine.log.segment import Segment
from twinlog.engine.log.segment_index import IndexDamagedError
from twinlog.engine.records.batch_format import NO_TIMESTAMP, BatchHeader, validate_batch
from twinlog.engine.records.decompression_budget import DecompressionBudget

Result = TypeVar("Result")
# (segment, the index found damaged, why): rebuild the segment's indexes unless another
# reader did already (the segment's index is no longer the damaged one).
RebuildIndex = Callable[[Segment, object, str], None]


class Published(NamedTuple):
    """What readers may see; replaced whole (one attribute store) after each change."""

    segments: tuple[Segment, ...]
    base_offsets: tuple[int, ...]
    end_position: int  # readable bytes of segments[-1]; earlier segments are whole
    log_start_offset: int
    log_end_offset: int
    last_header: BatchHeader | None
    sealed_bytes: int  # bytes of every segment but the last (whole, so they do not change)

    def end_of(self, number: int) -> int:
        """The readable bytes of ``segments[number]``."""
        segment = self.segments[number]
        return self.end_position if number == len(self.segments) - 1 else segment.size_bytes

    def segment_for(self, offset: int) -> tuple[Segment, int]:
        """The segment that holds ``offset`` (in range), and its readable bytes."""
        number = bisect_right(self.base_offsets, offset) - 1
        return self.segments[number], self.end_of(number)

    def check_range(self, offset: int) -> None:
        if not self.log_start_offset <= offset < self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is out of range: the log holds offsets "
                f"{self.log_start_offset}..{self.log_end_offset} (end exclusive)",
                self.log_start_offset,
                self.log_end_offset,
            )

    def size_bytes(self) -> int:
        """The log's bytes, without a sum over its segments (asked at every append)."""
        return self.sealed_bytes + self.end_position


def read_batches(state: Published, offset: int, max_bytes: int, rebuild: RebuildIndex) -> bytes:
    """Whole batches from the one holding ``offset``, up to ``max_bytes`` (at least one), from
    one segment; b"" at the log end. Unchecked bytes are checked first (CorruptLogError)."""
    if offset == state.log_end_offset:
        return b""
    state.check_range(offset)
    segment, end_position = state.segment_for(offset)
    position, header = find_batch(segment, offset, end_position, rebuild)
    limit_position = position + max(max_bytes, 0)
    stop = repairing(
        segment,
        lambda: segment.boundary_at_or_before(
            position, header.base_offset, limit_position, end_position
        ),
        rebuild,
    )
    data = segment.read(position, stop - position)
    if not segment.checked.covers(position, stop):
        _check_batches(segment, data, position, header.base_offset)
        segment.checked.add(position, stop)
    return data


def iter_headers(
    state: Published, from_offset: int, rebuild: RebuildIndex
) -> Iterator[BatchHeader]:
    """Headers of the batches from the one holding ``from_offset`` to the end of ``state``,
    each batch checked before its header is yielded. The range is checked at the call."""
    if from_offset == state.log_end_offset:
        return iter(())
    state.check_range(from_offset)
    return _headers_from(state, from_offset, rebuild)


def bytes_from(state: Published, offset: int, rebuild: RebuildIndex) -> int:
    """The log's bytes from the batch holding ``offset`` to its end (0 at the end, the
    whole log below its start): how far behind a replica at ``offset`` is."""
    if offset >= state.log_end_offset:
        return 0
    if offset <= state.log_start_offset:
        return state.size_bytes()
    number = bisect_right(state.base_offsets, offset) - 1
    segment, end_position = state.segment_for(offset)
    position, _header = find_batch(segment, offset, end_position, rebuild)
    later = sum(state.end_of(n) for n in range(number + 1, len(state.segments)))
    return end_position - position + later


def _headers_from(
    state: Published, from_offset: int, rebuild: RebuildIndex
) -> Iterator[BatchHeader]:
    first = bisect_right(state.base_offsets, from_offset) - 1
    segment, end_position = state.segment_for(from_offset)
    position, header = find_batch(segment, from_offset, end_position, rebuild)
    expected_offset = header.base_offset
    for number in range(first, len(state.segments)):
        segment = state.segments[number]
        if number > first and segment.base_offset != expected_offset:
            earlier = state.segments[number - 1]
            raise CorruptLogError(
                f"{earlier.path} ends at offset {expected_offset}, but the next segment "
                f"starts at {segment.base_offset}: batches are missing from the end of "
                f"{earlier.path.name} (position {earlier.size_bytes}). Restore it from a "
                "backup or replica",
                str(earlier.path),
                earlier.size_bytes,
            )
        end_position = state.end_of(number)
        for batch_position, header in segment.headers(position, end_position, expected_offset):
            _check_unchecked_batch(segment, batch_position, header)
            yield header
            expected_offset = header.next_offset
        position = 0


def record_for_timestamp(
    state: Published,
    timestamp_ms: int,
    rebuild: RebuildIndex,
    budget: DecompressionBudget | None = None,
) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record whose timestamp is >= ``timestamp_ms``, or
    None (an offset below the log start, in a segment retention cut, is the log start)."""
    for number, segment in enumerate(state.segments):
        end_position = state.end_of(number)
        if end_position == 0 or segment.tail().max_timestamp_ms < timestamp_ms:
            continue  # nothing here reaches it (timestamps need not grow across segments)
        found = repairing(
            segment,
            partial(segment.record_for_timestamp, timestamp_ms, end_position, budget),
            rebuild,
        )
        if found is not None:
            return max(found[0], state.log_start_offset), found[1]
    return None


def record_with_max_timestamp(
    state: Published, rebuild: RebuildIndex, budget: DecompressionBudget | None = None
) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record holding the log's largest timestamp (Kafka's
    ListOffsets MAX_TIMESTAMP, KIP-734), or None for a log without records: the segments'
    summaries name the largest, the time index finds its first record."""
    largest = max(
        (
            segment.tail().max_timestamp_ms
            for number, segment in enumerate(state.segments)
            if state.end_of(number) > 0
        ),
        default=NO_TIMESTAMP,
    )
    if largest == NO_TIMESTAMP:
        return None
    return record_for_timestamp(state, largest, rebuild, budget)


def find_batch(
    segment: Segment, offset: int, end_position: int, rebuild: RebuildIndex
) -> tuple[int, BatchHeader]:
    """(position, header) of the batch of ``segment`` holding ``offset``, which the log says
    lies before ``end_position`` (CorruptLogError if it does not)."""
    found = repairing(segment, lambda: segment.find_batch(offset, end_position), rebuild)
    if found is None:
        raise CorruptLogError(
            f"{segment.path} has no batch holding offset {offset} before position "
            f"{end_position}, though the log says it should: batches are missing from the "
            "segment (was it cut short?). Restore it from a backup or replica",
            str(segment.path),
            end_position,
        )
    return found


def repairing(segment: Segment, lookup: Callable[[], Result], rebuild: RebuildIndex) -> Result:
    """``lookup()``; if the segment's index proves damaged, rebuild it and look again.

    Indexes are derived data: a wrong entry costs one validating scan of the
    segment (which raises CorruptLogError if the segment itself is bad).
    """
    index = segment.index
    try:
        return lookup()
    except IndexDamagedError as damage:
        rebuild(segment, index, str(damage))
    try:
        return lookup()
    except IndexDamagedError as damage:
        raise CorruptLogError(
            f"{segment.path}: its index is still inconsistent after a rebuild ({damage}); "
            "the segment changed while it was read",
            str(segment.path),
            0,
        ) from None


def _check_unchecked_batch(segment: Segment, position: int, header: BatchHeader) -> None:
    end_position = position + header.size_bytes
    if not segment.checked.covers(position, end_position):
        data = segment.read(position, header.size_bytes)
        _check_batches(segment, data, position, header.base_offset)
        segment.checked.add(position, end_position)


def _check_batches(segment: Segment, data: bytes, position: int, first_offset: int) -> None:
    """Validate every batch of ``data`` (read at ``position``): CRC, header, offsets."""
    index = 0
    expected_offset = first_offset
    while index < len(data):
        try:
            header = validate_batch(data, index)
            if header.base_offset != expected_offset:
                raise CorruptBatchError(
                    f"batch base offset is {header.base_offset}, expected {expected_offset}"
                )
        except CorruptBatchError as error:
            raise CorruptLogError(
                f"{segment.path}: the batch at position {position + index} (offset "
                f"{expected_offset} on) is damaged: {error}. It was not served. The bytes "
                "changed on disk after they were written (bit rot, a lost or misdirected "
                "write); offsets before it can still be read. Copy the partition directory "
                "aside and restore the segment from a backup or replica",
                str(segment.path),
                position + index,
            ) from None
        index += header.size_bytes
        expected_offset = header.next_offset
