"""Log compaction (Kafka's ``cleanup.policy=compact``): keep the latest record of every key.

A topic whose records are updates of keyed state (``__consumer_offsets``: one
record per commit of a group's offset) needs only the latest record per key.
Compaction rewrites the sealed segments of such a log without the records a
later record of the same key has replaced, so the log stays about as large as
its set of live keys, and reading it from the start (the broker folding
``__consumer_offsets`` into memory at start-up) costs that much, not all history.

What is compacted
    Sealed segments only, never the active one (as Kafka), and of those only a
    prefix: the run stops at the first segment that is

    * newer than ``min_compaction_lag_ms`` (its largest batch timestamp; 0, the
      default, as Kafka's, means no lag);
    * at or after the recovery point's segment (recovery scans those from a
      byte position, which a rewrite would move; normally the recovery point is
      in the active segment, so this excludes nothing);
    * not wholly below ``protected_from_offset()``, the owner's bound on what may
      be rewritten (the broker: where a copy the copier has not recorded as
      APPLIED starts, since its crash recovery recognises its batches in the log
      by every header field, CRC and record count included).

When
    Kafka's dirty ratio: the ``cleaner-offset`` checkpoint (checkpoints.py)
    says where the last compaction stopped. Bytes of the run after it are dirty;
    compaction runs when ``dirty / (clean + dirty) >= min_cleanable_dirty_ratio``
    (default 0.5) and something is dirty. The checkpoint only decides when: a
    lost one costs one compaction of the whole run, never a record.

What is kept
    A map from key to its latest offset is built over the whole run (every
    sealed segment from the first one; memory is O(distinct keys)). Then each
    record is kept if and only if

    * its key is null (such records cannot exist in a compacted topic: the
      broker refuses them at the door with CorruptBatchError, see
      compaction_records.require_keys; one written before the topic was
      compacted is kept, since nothing can replace it), or
    * it is the latest record of its key in the run, and it is not a tombstone
      (null value) older than ``delete_retention_ms`` (default 1 day, Kafka's
      ``delete.retention.ms``; age from the record's timestamp, or the segment's
      largest timestamp if it has none, the clock retention uses). Dropping an
      old tombstone is safe: every older record of its key in the run is
      dropped with it, and a newer one (after the run) supersedes it anyway.

    A record of the run that a record *after* the run replaces is kept this
    time; the next compaction that reaches that record drops it.

Batches
    A batch keeps its base offset and its last offset delta, so every batch
    still starts at the next offset of the one before (the data log, its
    recovery scan and every reader check that), and offsets inside a batch
    get gaps (as in Kafka). Its producer id / generation / base sequence,
    partition leader epoch and attributes (so the codec) stay; only records go, and the
    batch is re-encoded (compaction_records.py: fresh CRC, same codec) on this
    path only. A batch that keeps every record is copied byte for byte.

    A batch none of whose records is kept: a gap between batches is not
    allowed, so something must hold its offsets. Extending a neighbour over
    them would change that neighbour's base offset or last offset delta (which
    the batch's sequence range and the copier's header comparison rest on);
    keeping its last record would keep a stale value, which could even revive a
    key whose tombstone later expired. So instead:

    * a run of such batches becomes ONE *filler batch* (61 bytes, no records,
      no producer) spanning the run's offsets; a run ends where the partition
      leader epoch changes, so the filler keeps its batches' epoch and the
      epoch cache can be rebuilt from a compacted log;
    * except the last batch of an idempotent producer in the run (producer id
      and base sequence set), which is kept as an *empty batch* (its header,
      ``record_count`` 0): a partition rebuilds its producers' sequence state
      from the batch headers of its log after a crash, and Kafka keeps that
      batch for the same reason.

    So a compacted log holds at most (kept batches + producers + 1) batches per
    segment group besides its records: its size follows the live keys.

Segments
    Consecutive segments of the run are grouped while their sizes add up to at
    most ``segment_bytes`` (and their offsets fit the index's u32 relative
    offsets); a group becomes one cleaned segment named after its first one.
    Groups are formed from the sizes before cleaning, so the same call then
    runs merge passes over what it compacted (no dirty ratio asked) while two
    neighbours fit one segment: the log does not keep a small segment (and
    three open files) per segment it ever sealed. A one-segment group from
    which nothing would be dropped is left alone.

Crash safety
    compaction_files.py: the cleaned segment and its indexes are written under
    temporary names and fsynced (here), renamed to ``.swap`` (the commit), then
    the replaced segments are deleted and the swap renamed into place (by the
    log: ``DataLog.replace_segments``). Recovery on open finishes a committed
    swap and deletes an uncommitted one, so after a crash at any point the log
    holds either the old segments or the new one.

Concurrency
    Compaction reaches the log only through its compaction API (data_log.py:
    ``compaction_turn``, ``segments_view``, ``replace_segments``), as Kafka's
    cleaner reaches its log through ``replaceSegments``. The reading and writing
    happen without the log's write lock (appends go on); it is taken twice,
    briefly: to choose the segments (``segments_view``; the compaction reads them
    through its own duplicated file descriptors), and to swap
    (``replace_segments``), after checking that the log still holds exactly those
    segments and that nothing was truncated meanwhile; the protected offset is
    checked just before. If either refuses, the cleaned files are deleted and the
    next run starts over. A reader holding the old segments keeps reading them
    through their open descriptors (their indexes are loaded before the swap, so
    they never read the new files by name), exactly as with a segment retention
    deleted; it sees the old bytes, which hold every record the new ones hold.
    One compaction runs per log at a time (``compaction_turn``).
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from twinlog.engine.base.errors import CorruptBatchError, CorruptLogError
from twinlog.engine.log.checkpoints import read_cleaner_offset, write_cleaner_offset
from twinlog.engine.log.compaction_files import CleanedSegmentWriter
from twinlog.engine.log.scan import ScanResult, iter_valid_batches
from twinlog.engine.log.segment import Segment, wall_clock_ms
from twinlog.engine.log.segment_index import RELATIVE_OFFSET_MAX
from twinlog.engine.records.batch_format import (
    NO_PRODUCER_ID,
    RECORDS_OFFSET,
    BatchHeader,
    read_header,
)
from twinlog.engine.records.decompression_budget import DecompressionBudget, section_reserved
from twinlog.engine.records.rewrite import (
    RecordSpan,
    filler_batch,
    iter_record_spans,
    rebuild_batch,
    records_section,
)

if TYPE_CHECKING:
    from twinlog.engine.log.data_log import DataLog
    from twinlog.engine.log.segments_view import SegmentsView

logger = logging.getLogger(__name__)


@dataclass
class CompactionReport:
    """What one ``compact`` call did. Counts add up its two passes: the
    compaction, and the merge of the segments it wrote that now fit together."""

    skipped: str = ""  # why nothing (more) was compacted ("" if it ran to the end)
    dirty_ratio: float = 0.0  # of the run when it was planned
    segments_replaced: int = 0  # source segments swapped out
    segments_written: int = 0  # cleaned segments swapped in
    bytes_before: int = 0  # of the replaced segments
    bytes_after: int = 0  # of the cleaned ones
    records_dropped: int = 0  # replaced by a later record of their key
    tombstones_dropped: int = 0  # latest of their key, older than delete_retention_ms
    batches_rewritten: int = 0  # re-encoded without some records (or as empty batches)
    first_dirty_offset: int = -1  # where the next compaction's dirty part starts


_SUMMED = (
    "segments_replaced",
    "segments_written",
    "bytes_before",
    "bytes_after",
    "records_dropped",
    "tombstones_dropped",
    "batches_rewritten",
)


class _Stopped(Exception):
    """The log was closed, or the owner asked to stop: drop the work, change nothing."""


@dataclass
class _Source:
    """A sealed segment being compacted, read through a descriptor of our own."""

    segment: Segment
    fd: int
    size_bytes: int
    end_offset: int  # the next offset after its last batch
    largest_timestamp_ms: int  # tombstones without a timestamp are this old
    mtime_ns: int


@dataclass
class _Plan:
    sources: list[_Source]
    groups: list[list[_Source]]
    first_dirty_offset: int
    dirty_ratio: float
    view: SegmentsView  # what it was planned from; the swaps hand it back


@dataclass
class _Latest:
    """The outcome of the first pass: what is the latest in the run."""

    offset_by_key: dict[bytes, int] = field(default_factory=dict)
    last_batch_by_producer: dict[int, int] = field(default_factory=dict)  # -> base offset


def compact(
    log: DataLog,
    now_ms: int | None = None,
    *,
    protected_from_offset: Callable[[], int | None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    budget: DecompressionBudget | None = None,
) -> CompactionReport:
    """Compact ``log``'s sealed segments if it is compacted and dirty enough (module doc).

    Keeps the latest record per key; offsets do not change. ``protected_from_offset``
    bounds what may be rewritten: batches at or after the offset it returns stay as
    they are (None: no bound). It is called without the log's lock, before the
    segments are chosen and before each swap. ``should_stop`` is polled between
    batches: True drops the work, changing nothing. Raises CorruptLogError if a sealed
    segment is damaged, OSError (e.g. DiskFullError's cause) likewise, changing nothing.
    Each batch's records are charged to ``budget`` while decompressed (a spent budget:
    NotEnoughResourcesError, changing nothing; the next round tries again).
    Compaction reaches the log only through its compaction API (``compaction_turn``,
    ``segments_view``, ``replace_segments``); the log knows nothing of compaction.
    """
    now_ms = wall_clock_ms() if now_ms is None else now_ms
    if not log.config.compacts:
        return CompactionReport(skipped=f"cleanup.policy is {log.config.cleanup_policy}")
    with log.compaction_turn() as refused:
        if refused:
            return CompactionReport(skipped=refused)
        report = CompactionReport()
        _plan_and_run(log, now_ms, protected_from_offset, should_stop, report, budget=budget)
        # The groups were formed from the sizes before cleaning: the cleaned segments
        # are smaller and may now fit together. Merge them now rather than at the next
        # compaction, which needs new dirty bytes to happen. Only up to where the first
        # pass ended (segments sealed since are the next compaction's), and each pass
        # that swaps merges segments, so this ends.
        merge_end_offset = report.first_dirty_offset
        while report.segments_written > 0 and not report.skipped:
            merge = CompactionReport(dirty_ratio=report.dirty_ratio)
            _plan_and_run(
                log,
                now_ms,
                protected_from_offset,
                should_stop,
                merge,
                merge_end_offset,
                budget=budget,
            )
            if merge.skipped or merge.segments_written == 0:
                break
            merge.first_dirty_offset = max(merge.first_dirty_offset, report.first_dirty_offset)
            for name in _SUMMED:
                setattr(merge, name, getattr(report, name) + getattr(merge, name))
            report = merge
        return report


def _plan_and_run(
    log: DataLog,
    now_ms: int,
    protected_from_offset: Callable[[], int | None] | None,
    should_stop: Callable[[], bool] | None,
    report: CompactionReport,
    merge_end_offset: int | None = None,
    *,
    budget: DecompressionBudget | None,
) -> None:
    """One compaction of the run, into ``report``. With ``merge_end_offset``: of the run up
    to that offset, only if it merges segments, dirty or not."""
    protected = protected_from_offset() if protected_from_offset is not None else None
    with log.segments_view() as view:
        planned = _plan(log, view, now_ms, protected, merge_end_offset)
    if isinstance(planned, str):
        report.skipped = planned
        return
    try:
        _run(log, planned, now_ms, protected_from_offset, should_stop, report, budget)
    except _Stopped:
        report.skipped = "stopped: the log closed or the owner stops"
    finally:
        for source in planned.sources:
            os.close(source.fd)


def _plan(
    log: DataLog,
    view: SegmentsView,
    now_ms: int,
    protected: int | None,
    merge_end_offset: int | None,
) -> _Plan | str:
    """Choose the run of sealed segments (while ``view`` holds); a reason if there is none.

    ``merge_end_offset``: a merge pass. The run ends there, the dirty ratio is not
    asked, but two of its segments must fit together.

    ``protected`` was asked for before the lock was taken: a copy that began since
    may lie in the run, which the check before each swap catches.
    """
    config = log.config
    point_segment = view.recovery_point_base_offset
    chosen: list[Segment] = []
    for segment in view.sealed:
        tail = segment.tail()  # loads the index too: old segments never read files by name
        if segment.base_offset >= point_segment:
            break
        if protected is not None and tail.next_offset > protected:
            break
        if merge_end_offset is not None and tail.next_offset > merge_end_offset:
            break
        if (
            config.min_compaction_lag_ms > 0
            and now_ms - segment.largest_timestamp_ms() < config.min_compaction_lag_ms
        ):
            break
        chosen.append(segment)
    if not chosen:
        return "no sealed segment may be compacted yet"
    run_end = chosen[-1].tail().next_offset
    stored = read_cleaner_offset(log.directory)
    first_dirty = chosen[0].base_offset if stored is None else stored
    first_dirty = max(chosen[0].base_offset, min(first_dirty, view.log_end_offset))
    total_bytes = sum(segment.size_bytes for segment in chosen)
    dirty_bytes = sum(s.size_bytes for s in chosen if s.tail().next_offset > first_dirty)
    ratio = dirty_bytes / total_bytes if total_bytes else 0.0
    if merge_end_offset is not None:
        sizes = [segment.size_bytes for segment in chosen]
        if not any(a + b <= config.segment_bytes for a, b in itertools.pairwise(sizes)):
            return "no segments to merge"
    elif dirty_bytes == 0 or first_dirty >= run_end:
        return f"nothing dirty: offsets below {first_dirty} were compacted already"
    elif ratio < config.min_cleanable_dirty_ratio:
        return (
            f"dirty ratio {ratio:.3f} is below min_cleanable_dirty_ratio "
            f"{config.min_cleanable_dirty_ratio}"
        )
    sources = []
    try:
        for segment in chosen:
            fd = os.dup(segment.read_fd)
            sources.append(
                _Source(
                    segment,
                    fd,
                    segment.size_bytes,
                    segment.tail().next_offset,
                    segment.largest_timestamp_ms(),
                    os.fstat(fd).st_mtime_ns,
                )
            )
    except BaseException:
        for source in sources:
            os.close(source.fd)
        raise
    return _Plan(sources, _groups(sources, config.segment_bytes), first_dirty, ratio, view)


def _groups(sources: list[_Source], segment_bytes: int) -> list[list[_Source]]:
    """Consecutive sources, merged while they fit one segment (sizes and u32 relative offsets)."""
    groups: list[list[_Source]] = []
    for source in sources:
        current = groups[-1] if groups else None
        if (
            current is not None
            and sum(member.size_bytes for member in current) + source.size_bytes <= segment_bytes
            and source.end_offset - 1 - current[0].segment.base_offset <= RELATIVE_OFFSET_MAX
        ):
            current.append(source)
        else:
            groups.append([source])
    return groups


def _run(
    log: DataLog,
    plan: _Plan,
    now_ms: int,
    protected_from_offset: Callable[[], int | None] | None,
    should_stop: Callable[[], bool] | None,
    report: CompactionReport,
    budget: DecompressionBudget | None,
) -> None:
    if not report.dirty_ratio:
        report.dirty_ratio = plan.dirty_ratio

    def check_stop() -> None:
        if log.closed or (should_stop is not None and should_stop()):
            raise _Stopped

    latest = _Latest()
    for source in plan.sources:
        for _, header, spans in _batches_with_records(source, check_stop, budget):
            for span in spans:
                if span.key is not None:
                    latest.offset_by_key[span.key] = span.offset
            if _is_idempotent(header):
                latest.last_batch_by_producer[header.producer_id] = header.base_offset
    compacted_to = plan.first_dirty_offset
    for group in plan.groups:
        writer = _write_group(log, group, latest, now_ms, report, check_stop, budget)
        if writer is not None:
            if not _swap(log, plan, group, writer, protected_from_offset):
                report.skipped = "the log changed under the compaction; the next run starts over"
                break
            report.segments_replaced += len(group)
            report.segments_written += 1
            report.bytes_before += sum(source.size_bytes for source in group)
            report.bytes_after += writer.size_bytes
        compacted_to = max(compacted_to, group[-1].end_offset)
    report.first_dirty_offset = compacted_to
    if compacted_to != plan.first_dirty_offset:
        write_cleaner_offset(log.directory, compacted_to)
    logger.info(
        "%s: compacted %d segments into %d, %d -> %d bytes, %d records and %d tombstones dropped%s",
        log.directory,
        report.segments_replaced,
        report.segments_written,
        report.bytes_before,
        report.bytes_after,
        report.records_dropped,
        report.tombstones_dropped,
        f" ({report.skipped})" if report.skipped else "",
    )


def _section_of(batch: memoryview, header: BatchHeader) -> memoryview:
    """The batch's records section as stored (compressed or not)."""
    return batch[RECORDS_OFFSET : header.size_bytes]


def _is_idempotent(header: BatchHeader) -> bool:
    return header.producer_id != NO_PRODUCER_ID and header.base_sequence >= 0


def _batches_with_records(
    source: _Source, check_stop: Callable[[], None], budget: DecompressionBudget | None
) -> Iterator[tuple[memoryview, BatchHeader, list[RecordSpan]]]:
    """Each batch of ``source`` (CRC and offsets checked) with its records' spans (the
    section charged to ``budget`` while it is decompressed and decoded)."""
    segment = source.segment
    result = ScanResult(0, segment.base_offset)
    for position, header, batch in iter_valid_batches(source.fd, 0, source.size_bytes, result):
        check_stop()
        try:
            spans = []
            if header.record_count:  # the spans hold copies of their keys, not the section
                with section_reserved(budget, header.codec, _section_of(batch, header)):
                    spans = list(iter_record_spans(records_section(batch, header), header))
        except CorruptBatchError as error:
            raise CorruptLogError(
                f"{segment.path}: the records of the batch at position {position} do not "
                f"decode ({error}), though its CRC matches; compaction changed nothing",
                str(segment.path),
                position,
            ) from None
        yield batch, header, spans
    if result.bad_position is not None or result.next_offset != source.end_offset:
        position = result.bad_position if result.bad_position is not None else result.end_position
        raise CorruptLogError(
            f"{segment.path} holds a bad batch at position {position} ({result.bad_reason}): "
            "the sealed segment is damaged; compaction changed nothing. Restore it from a "
            "backup or replica",
            str(segment.path),
            position,
        )


class _FillerRun:
    """Consecutive batches of which nothing is kept: one filler batch will span them."""

    def __init__(self, header: BatchHeader, batch: memoryview) -> None:
        self.base_offset = header.base_offset
        self.next_offset = header.next_offset
        self.first_timestamp_ms = header.first_timestamp_ms
        self.max_timestamp_ms = header.max_timestamp_ms
        self.epoch = header.partition_leader_epoch  # the same for every batch of the run
        self.only_batch: bytes | None = bytes(batch)  # the run's batch while it is alone

    def extend(self, header: BatchHeader) -> None:
        self.next_offset = header.next_offset
        self.max_timestamp_ms = max(self.max_timestamp_ms, header.max_timestamp_ms)
        self.only_batch = None

    def batch(self) -> bytes:
        return filler_batch(
            self.base_offset,
            self.next_offset,
            self.first_timestamp_ms,
            self.max_timestamp_ms,
            self.epoch,
        )


def _write_group(
    log: DataLog,
    group: list[_Source],
    latest: _Latest,
    now_ms: int,
    report: CompactionReport,
    check_stop: Callable[[], None],
    budget: DecompressionBudget | None,
) -> CleanedSegmentWriter | None:
    """Write the group's cleaned segment (fsynced, not committed); None if nothing changes."""
    config = log.config
    writer = CleanedSegmentWriter(
        log.directory, group[0].segment.base_offset, config.index_interval_bytes
    )
    changed = len(group) > 1  # merging segments is a change even if no record goes
    records_dropped = tombstones_dropped = batches_rewritten = 0
    filler: _FillerRun | None = None

    def write_filler() -> None:
        nonlocal filler, changed
        if filler is not None:
            batch = filler.batch()
            changed = changed or batch != filler.only_batch
            writer.append(batch, read_header(batch))
            filler = None

    try:
        for source in group:
            for batch, header, spans in _batches_with_records(source, check_stop, budget):
                kept = []
                for span in spans:
                    if span.key is not None and latest.offset_by_key[span.key] != span.offset:
                        records_dropped += 1
                    elif (
                        span.key is not None
                        and span.is_tombstone
                        and now_ms - _age_basis_ms(span, source) > config.delete_retention_ms
                    ):
                        tombstones_dropped += 1
                    else:
                        kept.append(span)
                holds_producer_state = (
                    _is_idempotent(header)
                    and latest.last_batch_by_producer[header.producer_id] == header.base_offset
                )
                if not kept and not holds_producer_state:
                    if filler is not None and filler.epoch != header.partition_leader_epoch:
                        write_filler()
                    if filler is None:
                        filler = _FillerRun(header, batch)
                    else:
                        filler.extend(header)
                    continue
                write_filler()
                if len(kept) == len(spans):
                    writer.append(batch, header)  # unchanged: the bytes as they are
                else:
                    with section_reserved(budget, header.codec, _section_of(batch, header)):
                        rebuilt = rebuild_batch(header, records_section(batch, header), kept)
                    writer.append(rebuilt, read_header(rebuilt))
                    batches_rewritten += 1
                    changed = True
        write_filler()
        assert writer.next_offset == group[-1].end_offset, (writer.next_offset, group)
        if not changed:
            writer.discard()
            return None
        writer.finish(max(source.mtime_ns for source in group))
    except BaseException:
        writer.discard()
        raise
    report.records_dropped += records_dropped
    report.tombstones_dropped += tombstones_dropped
    report.batches_rewritten += batches_rewritten
    return writer


def _age_basis_ms(span: RecordSpan, source: _Source) -> int:
    """The time a tombstone's age counts from: its timestamp, else its segment's newest."""
    return span.timestamp_ms if span.timestamp_ms >= 0 else source.largest_timestamp_ms


def _swap(
    log: DataLog,
    plan: _Plan,
    group: list[_Source],
    writer: CleanedSegmentWriter,
    protected_from_offset: Callable[[], int | None] | None,
) -> bool:
    """Put the cleaned segment in place of the group, if the owner and the log still allow it."""
    # Asked before the log takes its lock (it may read the owner's journal): a copy
    # that begins after this call starts at a log end at or past the group's end,
    # since the group was sealed before; one under way now is in the answer.
    protected = protected_from_offset() if protected_from_offset is not None else None
    if protected is not None and group[-1].end_offset > protected:
        writer.discard()
        return False
    return log.replace_segments([source.segment for source in group], writer, plan.view)
