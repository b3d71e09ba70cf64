"""Log compaction of a DataLog: what it keeps, the batches it writes, when it runs, readers."""

from __future__ import annotations

import itertools
import os
import threading
from pathlib import Path

import pytest
from log_support import TIMESTAMP_MS, all_batches, read_all, segment_files

from twinlog.engine.base.errors import CorruptBatchError, InvalidConfigError, OffsetOutOfRangeError
from twinlog.engine.broker.producer_state import SequenceTracker
from twinlog.engine.log import DataLog, LogConfig, LogReader, compact
from twinlog.engine.log.checkpoints import CLEANER_OFFSET_NAME
from twinlog.engine.log.files import index_path, time_index_path
from twinlog.engine.records.batch_builder import RecordBatchBuilder
from twinlog.engine.records.batch_format import BatchHeader, read_header, validate_batch
from twinlog.engine.records.batch_reader import iter_batches
from twinlog.engine.records.compression import CODEC_NONE, CODEC_ZSTD
from twinlog.engine.records.rewrite import require_keys

DAY_MS = 24 * 3600 * 1000
NOW_MS = TIMESTAMP_MS + 1000

Write = tuple[bytes | None, bytes | None]  # (key, value)


def compacted(**overrides: object) -> LogConfig:
    settings: dict[str, object] = {
        "segment_bytes": 600,
        "index_interval_bytes": 128,
        "cleanup_policy": "compact",
        "min_cleanable_dirty_ratio": 0.0,
    }
    settings.update(overrides)
    return LogConfig(**settings)  # type: ignore[arg-type]


def keyed_batch(
    writes: list[Write],
    codec: str = "none",
    timestamp_ms: int = TIMESTAMP_MS,
    producer: tuple[int, int, int] | None = None,
) -> bytes:
    producer_id, generation, sequence = producer or (-1, -1, -1)
    builder = RecordBatchBuilder(
        codec, producer_id=producer_id, producer_generation=generation, base_sequence=sequence
    )
    for key, value in writes:
        builder.append(value, key=key, timestamp_ms=timestamp_ms)
    return builder.build()


def roll(log: DataLog) -> None:
    """Seal the active segment now (the active segment is never compacted)."""
    segments = log._segment_list
    with segments.write_lock:
        segments._roll()
        segments.publish()


def active_size_bytes(log: DataLog) -> int:
    with log.segments_view() as view:
        return view.active.size_bytes


def latest_by_key(log: DataLog) -> dict[bytes | None, bytes | None]:
    latest: dict[bytes | None, bytes | None] = {}
    for _, records in all_batches(log):
        for record in records:
            latest[record.key] = record.value
    return latest


def check_contiguous(log: DataLog) -> None:
    log.check()
    headers = [header for header, _ in all_batches(log)]
    assert headers[0].base_offset == log.log_start_offset
    for earlier, later in itertools.pairwise(headers):
        assert later.base_offset == earlier.next_offset
    assert headers[-1].next_offset == log.log_end_offset


def fill(log: DataLog, rounds: int, keys: int = 5, per_batch: int = 3) -> dict[bytes, bytes]:
    """``rounds`` batches of keyed updates cycling over ``keys`` keys; returns the latest."""
    model: dict[bytes, bytes] = {}
    counter = itertools.count()
    for round_number in range(rounds):
        writes: list[Write] = []
        for _ in range(per_batch):
            number = next(counter)
            key, value = f"k{number % keys}".encode(), f"v{number}".encode()
            writes.append((key, value))
            model[key] = value
        log.append_as_leader(keyed_batch(writes, codec="zstd" if round_number % 2 else "none"))
    return model


# --- configuration ------------------------------------------------------------------


def test_compaction_settings_have_kafka_defaults_and_keys() -> None:
    config = LogConfig()
    assert config.cleanup_policy == "delete" and config.deletes and not config.compacts
    assert config.min_compaction_lag_ms == 0
    assert config.min_cleanable_dirty_ratio == 0.5
    assert config.delete_retention_ms == DAY_MS
    mapped = LogConfig.from_mapping(
        {
            "cleanup.policy": "delete, compact",
            "min.compaction.lag.ms": "60000",
            "min.cleanable.dirty.ratio": "0.25",
            "delete.retention.ms": "1000",
        }
    )
    assert mapped.cleanup_policy == "compact,delete" and mapped.compacts and mapped.deletes
    assert (mapped.min_compaction_lag_ms, mapped.min_cleanable_dirty_ratio) == (60_000, 0.25)
    assert mapped.delete_retention_ms == 1000
    assert LogConfig.from_mapping({"log.cleanup.policy": "compact"}).cleanup_policy == "compact"


@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        ({"cleanup.policy": "shred"}, r"cleanup_policy \(cleanup.policy\) is 'shred'"),
        ({"cleanup.policy": ""}, "cleanup_policy"),
        (
            {"min.cleanable.dirty.ratio": "1.5"},
            r"min_cleanable_dirty_ratio .* is 1\.5, expected a number 0\.\.1",
        ),
        ({"min.cleanable.dirty.ratio": "half"}, r"is 'half', expected a number 0\.\.1"),
        ({"min.cleanable.dirty.ratio": "nan"}, "min_cleanable_dirty_ratio"),
        ({"delete.retention.ms": "-1"}, "delete_retention_ms"),
        ({"min.compaction.lag.ms": "-5"}, "min_compaction_lag_ms"),
    ],
)
def test_bad_compaction_settings_name_the_key(mapping: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidConfigError, match=message):
        LogConfig.from_mapping(mapping)


# --- what is kept -------------------------------------------------------------------


def test_keeps_the_latest_record_per_key_and_every_offset(tmp_path: Path) -> None:
    with DataLog.open(tmp_path, compacted()) as log:
        model = fill(log, 60)
        size_before, end_before = log.size_bytes(), log.log_end_offset
        report = compact(log, NOW_MS)
        assert report.skipped == "" and report.records_dropped > 0
        assert report.segments_replaced > 0 and report.bytes_after < report.bytes_before
        assert latest_by_key(log) == model
        check_contiguous(log)
        assert log.log_end_offset == end_before  # offsets never change
        assert log.size_bytes() < size_before / 3
        # Record offsets are the ones they were appended at (gaps, no renumbering).
        for _, records in all_batches(log):
            for record in records:
                assert int(record.value[1:]) == record.offset  # type: ignore[index]


def test_the_active_segment_is_never_compacted(tmp_path: Path) -> None:
    with DataLog.open(tmp_path, compacted(segment_bytes=1 << 20)) as log:
        fill(log, 40)
        assert len(segment_files(tmp_path)) == 1
        before = read_all(log)
        assert compact(log, NOW_MS).skipped == "no sealed segment may be compacted yet"
        assert read_all(log) == before


def test_a_rewritten_batch_keeps_its_header_and_codec(tmp_path: Path) -> None:
    with DataLog.open(tmp_path, compacted()) as log:
        first = log.append_as_leader(
            keyed_batch([(b"a", b"1"), (b"b", b"1"), (b"c", b"1")], "zstd", producer=(7, 2, 0))
        )
        log.append_as_leader(keyed_batch([(b"b", b"2")], producer=(7, 2, 3)))
        fill(log, 30, keys=3)  # keys k0..k2: a and c stay the latest of theirs
        original = validate_batch(log.read(first, 1))
        compact(log, NOW_MS)
        data = log.read(first, 1)
        header = validate_batch(data)  # the CRC was recomputed
        batch = next(iter_batches(data))
        assert [(r.offset, r.key) for r in batch.records()] == [(0, b"a"), (2, b"c")]
        assert header.record_count == 2
        same = ("batch_length", "crc", "record_count")
        assert header._replace(**{f: 0 for f in same}) == original._replace(**{f: 0 for f in same})
        assert header.codec == CODEC_ZSTD and header.next_offset == original.next_offset
        check_contiguous(log)


def test_batches_that_keep_nothing_become_one_filler(tmp_path: Path) -> None:
    with DataLog.open(tmp_path, compacted(segment_bytes=1 << 20)) as log:
        for number in range(10):  # ten batches, all superseded below
            log.append_as_leader(keyed_batch([(b"k", b"%d" % number), (b"j", b"%d" % number)]))
        log.append_as_leader(keyed_batch([(b"k", b"last"), (b"j", b"last")]))
        roll(log)
        log.append_as_leader(keyed_batch([(b"x", b"y")]))
        compact(log, NOW_MS)
        batches = all_batches(log)
        filler, kept = batches[0][0], batches[1]
        assert (filler.base_offset, filler.next_offset) == (0, 20)
        assert filler.record_count == 0 and filler.size_bytes == 61
        assert (filler.producer_id, filler.base_sequence) == (-1, -1)
        assert filler.partition_leader_epoch == 0  # the epoch its batches were appended under
        assert filler.codec == CODEC_NONE and filler.max_timestamp_ms == TIMESTAMP_MS
        assert [r.value for r in kept[1]] == [b"last", b"last"]
        check_contiguous(log)


def test_a_producers_last_batch_keeps_its_header_so_sequences_survive(tmp_path: Path) -> None:
    with DataLog.open(tmp_path, compacted(segment_bytes=1 << 20)) as log:
        log.append_as_leader(keyed_batch([(b"k", b"1"), (b"k", b"2")], producer=(9, 1, 0)))
        log.append_as_leader(keyed_batch([(b"k", b"3"), (b"j", b"1")], producer=(9, 1, 2)))
        roll(log)
        log.append_as_leader(
            keyed_batch([(b"k", b"4"), (b"j", b"2")])
        )  # supersedes all of producer 9
        roll(log)
        log.append_as_leader(keyed_batch([(b"z", b"1")]))
        compact(log, NOW_MS)
        headers = [header for header, _ in all_batches(log)]
        empty = headers[1]  # producer 9's last batch: no records, header kept
        assert (empty.producer_id, empty.base_sequence, empty.record_count) == (9, 2, 0)
        assert headers[0].producer_id == -1 and headers[0].record_count == 0  # a filler
        tracker = SequenceTracker()  # as a partition rebuilds it after a crash
        for header in log.iter_headers(0):
            tracker.observe(header, header.base_offset)
        assert tracker.producers[9].last_sequence == 3
        check_contiguous(log)


def test_tombstones_are_kept_for_delete_retention_then_dropped(tmp_path: Path) -> None:
    config = compacted(delete_retention_ms=DAY_MS)
    with DataLog.open(tmp_path, config) as log:
        log.append_as_leader(keyed_batch([(b"gone", b"1"), (b"stays", b"1")]))
        log.append_as_leader(keyed_batch([(b"gone", None)]))
        fill(log, 30)
        compact(log, NOW_MS)
        assert latest_by_key(log)[b"gone"] is None  # the tombstone is still there
        assert b"gone" in latest_by_key(log)
        fill(log, 30)  # new dirty data, so a later compaction runs at all
        report = compact(log, TIMESTAMP_MS + DAY_MS + 1)
        assert report.tombstones_dropped == 1
        latest = latest_by_key(log)
        assert b"gone" not in latest and latest[b"stays"] == b"1"
        check_contiguous(log)


def test_null_keys_are_refused_at_the_door_and_kept_if_present(tmp_path: Path) -> None:
    batch = keyed_batch([(b"k0", b"1"), (None, b"keyless")], "zstd")
    with pytest.raises(CorruptBatchError, match=r"record 1 .* null key, but topic t is compact"):
        require_keys(batch, validate_batch(batch), "topic t")
    require_keys(keyed_batch([(b"k", b"1")]), read_header(keyed_batch([(b"k", b"1")])), "t")
    with DataLog.open(tmp_path, compacted()) as log:  # the log itself does not refuse it
        log.append_as_leader(batch)
        fill(log, 40, keys=1)
        compact(log, NOW_MS)
        first = all_batches(log)[0][1]  # k0 was replaced; nothing replaces a keyless record
        assert [(r.key, r.value) for r in first] == [(None, b"keyless")]
        check_contiguous(log)


# --- when it runs --------------------------------------------------------------------


def test_dirty_ratio_and_checkpoint_decide_when(tmp_path: Path) -> None:
    with DataLog.open(tmp_path, compacted(min_cleanable_dirty_ratio=0.5)) as log:
        fill(log, 60, keys=40)  # many live keys: the compacted part stays large
        first = compact(log, NOW_MS)
        assert first.skipped == "" and first.dirty_ratio == 1.0  # no checkpoint: all dirty
        assert (tmp_path / CLEANER_OFFSET_NAME).exists()
        assert compact(log, NOW_MS).skipped.startswith("nothing dirty")
        fill(log, 2)  # a little: the sealed part is mostly clean
        roll(log)
        log.append_as_leader(keyed_batch([(b"x", b"y")]))
        assert compact(log, NOW_MS).skipped.startswith("dirty ratio")
    (tmp_path / CLEANER_OFFSET_NAME).unlink()  # lost: everything is dirty again
    with DataLog.open(tmp_path, compacted(min_cleanable_dirty_ratio=0.5)) as log:
        assert compact(log, NOW_MS).dirty_ratio == 1.0


def test_min_compaction_lag_and_protected_offset_bound_the_run(tmp_path: Path) -> None:
    with DataLog.open(tmp_path, compacted(min_compaction_lag_ms=DAY_MS)) as log:
        fill(log, 60)
        assert compact(log, NOW_MS).skipped == "no sealed segment may be compacted yet"
        assert compact(log, TIMESTAMP_MS + DAY_MS).skipped == ""
    with DataLog.open(tmp_path / "p", compacted()) as log:
        fill(log, 60)
        second_segment = int(segment_files(tmp_path / "p")[1].stem)
        before = read_all(log, 0)
        report = compact(log, NOW_MS, protected_from_offset=lambda: second_segment)
        assert report.segments_replaced == 1  # only the segment wholly below the bound
        assert (
            read_all(log, second_segment)
            == before[len(before) - len(read_all(log, second_segment)) :]
        )
        assert compact(log, NOW_MS, protected_from_offset=lambda: 0).skipped.startswith("no sealed")


def test_retention_deletes_nothing_when_the_policy_is_compact_only(tmp_path: Path) -> None:
    with DataLog.open(tmp_path, compacted(retention_ms=1, retention_bytes=1)) as log:
        fill(log, 60)
        assert log.apply_retention(NOW_MS + DAY_MS) == 0
    config = compacted(cleanup_policy="compact,delete", retention_ms=1)
    with DataLog.open(tmp_path, config) as log:
        assert log.apply_retention(NOW_MS + DAY_MS) > 0


def test_a_delete_policy_log_is_not_compacted(tmp_path: Path) -> None:
    with DataLog.open(tmp_path, compacted(cleanup_policy="delete")) as log:
        fill(log, 60)
        assert compact(log, NOW_MS).skipped == "cleanup.policy is delete"


# --- segments and indexes -------------------------------------------------------------


def test_small_cleaned_segments_are_merged_and_indexes_match_a_rebuild(tmp_path: Path) -> None:
    with DataLog.open(tmp_path, compacted()) as log:
        model = fill(log, 80)
        sealed = len(segment_files(tmp_path)) - 1
        report = compact(log, NOW_MS)
        # Cleaned one by one (each source filled a segment), then merged in the same call.
        assert report.segments_written > sealed
        assert len(segment_files(tmp_path)) == 2  # one compacted segment and the active one
        assert latest_by_key(log) == model
        for number in range(12):  # more dirty segments: merged with the compacted one
            log.append_as_leader(keyed_batch([(b"k%d" % (number % 5), b"late%d" % number)] * 3))
            model[b"k%d" % (number % 5)] = b"late%d" % number
        roll(log)
        log.append_as_leader(keyed_batch([(b"x", b"y")]))
        model[b"x"] = b"y"
        compact(log, NOW_MS)
        assert len(segment_files(tmp_path)) == 2
        assert latest_by_key(log) == model
        check_contiguous(log)
        written = {
            path: (path.read_bytes(), time_index_path(tmp_path, int(path.stem)).read_bytes())
            for path in (index_path(tmp_path, int(p.stem)) for p in segment_files(tmp_path)[:-1])
        }
        with log.segments_view() as view:
            for segment in view.sealed:  # the index point rule gives the same bytes
                index, _ = segment.rebuild_index()
                index.close()
        for path, (offset_bytes, time_bytes) in written.items():
            assert path.read_bytes() == offset_bytes
            assert time_index_path(tmp_path, int(path.stem)).read_bytes() == time_bytes


def test_a_reopened_compacted_log_is_the_same(tmp_path: Path) -> None:
    with DataLog.open(tmp_path, compacted()) as log:
        model = fill(log, 60)
        compact(log, NOW_MS)
        data = read_all(log)
    with DataLog.open(tmp_path, compacted()) as log:
        assert log.recovery_report.batches_checked == 0  # closed cleanly: nothing scanned
        assert read_all(log) == data and latest_by_key(log) == model
        check_contiguous(log)
    assert [h.base_offset for h, _ in LogReader(tmp_path).iter_batches()] == [
        header.base_offset for header, _ in iter_batches_of(data)
    ]


def iter_batches_of(data: bytes) -> list[tuple[BatchHeader, None]]:
    return [(batch.header, None) for batch in iter_batches(data)]


# --- readers --------------------------------------------------------------------------


def test_a_reader_holding_old_segments_keeps_reading_them(tmp_path: Path) -> None:
    with DataLog.open(tmp_path, compacted()) as log:
        model = fill(log, 60)
        with log.segments_view() as before:  # the segments a reader holds before the swap
            old = before.sealed
        old_bytes = [segment.read(0, segment.size_bytes) for segment in old]
        compact(log, NOW_MS)
        with log.segments_view() as after:
            assert not any(s in (*after.sealed, after.active) for s in old)
        for segment, expected in zip(old, old_bytes, strict=True):
            assert segment.read(0, segment.size_bytes) == expected  # open descriptors
            position, header = segment.find_batch(segment.base_offset, segment.size_bytes)  # type: ignore[misc]
            assert (position, header.base_offset) == (0, segment.base_offset)
        assert latest_by_key(log) == model


def test_appends_and_reads_go_on_while_compacting(tmp_path: Path) -> None:
    with DataLog.open(tmp_path, compacted()) as log:
        model = fill(log, 100)
        stop = threading.Event()
        appended: dict[bytes, bytes] = {}
        failures: list[BaseException] = []

        def append_and_read() -> None:
            try:
                for number in itertools.count():
                    if stop.is_set():
                        return
                    key, value = f"w{number % 4}".encode(), f"n{number}".encode()
                    log.append_as_leader(keyed_batch([(key, value)]))
                    appended[key] = value
                    read_all(log, log.log_start_offset, max_bytes=200)
            except BaseException as error:
                failures.append(error)

        worker = threading.Thread(target=append_and_read)
        worker.start()
        try:
            for _ in range(5):
                compact(log, NOW_MS)
        finally:
            stop.set()
            worker.join()
        assert not failures, failures
        assert latest_by_key(log) == {**model, **appended}
        check_contiguous(log)


def test_log_reader_refuses_segments_that_do_not_follow_each_other(tmp_path: Path) -> None:
    with DataLog.open(tmp_path, compacted()) as log:
        fill(log, 60)
    middle = segment_files(tmp_path)[1]
    os.unlink(middle)  # as a reader listing the directory before a swap would find it
    reader = LogReader(tmp_path)
    with pytest.raises(OffsetOutOfRangeError, match="compacted or retention deleted"):
        list(reader.iter_batches())
