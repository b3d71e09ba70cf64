"""One writer, many readers: readers see whole batches only, up to a published end."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from log_support import batch_values, headers_of, make_batch

from twinlog.engine.log import DataLog, LogConfig
from twinlog.engine.records.batch_reader import iter_batches

BATCHES = 300


@pytest.mark.slow
def test_readers_see_whole_batches_while_the_writer_appends(tmp_path: Path) -> None:
    config = LogConfig(
        segment_bytes=4000,
        index_interval_bytes=300,
        flush_policy="interval",
        flush_interval_bytes=1 << 30,
        flush_interval_ms=1 << 40,
    )
    log = DataLog.open(tmp_path, config)
    done = threading.Event()
    failures: list[BaseException] = []
    reads = [0]

    def reader() -> None:
        try:
            next_offset = 0
            last_end = 0
            while not (done.is_set() and next_offset == log.log_end_offset):
                end = log.log_end_offset
                assert end >= last_end, "the log end went backwards"
                last_end = end
                chunk = log.read(next_offset, 700)
                if not chunk:
                    continue
                for batch in iter_batches(chunk):  # CRC-checked: no torn or foreign bytes
                    assert batch.header.base_offset == next_offset
                    tag = next_offset // 3
                    assert [r.value for r in batch.records()] == batch_values(
                        make_batch(3, tag=tag)
                    )
                    next_offset = batch.header.next_offset
                reads[0] += 1
                headers = list(log.iter_headers(max(0, next_offset - 3)))
                assert all(h.base_offset % 3 == 0 for h in headers)
                log.offset_for_timestamp(0)
        except BaseException as error:  # reported to the main thread
            failures.append(error)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for thread in threads:
        thread.start()
    for tag in range(BATCHES):
        if tag % 50 == 49:
            log.append_all_as_leader([make_batch(3, tag=tag)])
        else:
            log.append_as_leader(make_batch(3, tag=tag))
    done.set()
    for thread in threads:
        thread.join(timeout=60)
    assert not failures, failures[0]
    assert reads[0] > 0
    assert len(list(tmp_path.glob("*.log"))) > 5  # the readers crossed rolls
    log.check()
    log.close()


def test_retention_while_a_reader_holds_a_deleted_segment(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=400, retention_bytes=400)
    with DataLog.open(tmp_path, config) as log:
        for tag in range(20):
            log.append_as_leader(make_batch(3, tag=tag))
        iterator = log.iter_headers(0)
        first = next(iterator)
        assert log.apply_retention() > 0
        rest = list(iterator)  # the reader finishes from its open file descriptors
        assert [first.base_offset] + [h.base_offset for h in rest] == list(range(0, 60, 3))
        assert headers_of(log.read(log.log_start_offset, 1))[0].base_offset == log.log_start_offset
