"""A replicated journal log's high watermark covers only records already queued for LMDB:
``commit_to`` raises what the replicas hold first and queues the records below it one by
one (those read from the log: the last term's after a promotion, or ones whose writers
gave up), and a reader outside the order lock (the promotion barrier, the copier's
``wait_log_committed``) that waits for LMDB once the high watermark covers a record must
find it applied, or a new leader counts fewer entries of a transaction than its producer
wrote (a commit refused with TransactionDataMissingError)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from copier_support import replicated_leader_journal, transactional_batch

from twinlog.engine.base.errors import NotEnoughReplicasAfterAppendError

P0 = "orders-0"
WAIT_S = 10.0


def test_the_high_watermark_covers_only_records_queued_for_lmdb(tmp_path: Path) -> None:
    committing = [False]
    journal = replicated_leader_journal(tmp_path, P0, committing)
    try:
        for sequence in range(3):  # offsets 0..2, in the log; their writers gave up
            with pytest.raises(NotEnoughReplicasAfterAppendError):
                journal.append(P0, 5, transactional_batch(5, sequence))
        log = journal._replicated_log(P0)
        # Hold commit_to's queueing after its first record, as a slow reader of the log.
        first_queued, go_on = threading.Event(), threading.Event()
        enqueue = log._enqueue

        def held_enqueue(offset: int, record: Any) -> Any:
            if offset == 1:
                first_queued.set()
                assert go_on.wait(WAIT_S), "the test never let commit_to go on"
            return enqueue(offset, record)

        log._enqueue = held_enqueue  # type: ignore[method-assign]
        committer = threading.Thread(target=journal.commit_to, args=(P0, 3))
        committer.start()
        try:
            assert first_queued.wait(WAIT_S), "commit_to never queued its first record"
            seen = journal.high_watermark(P0)
            journal.wait_applied()  # as the promotion barrier does, once it saw it
            row = journal.local.partition_row(P0)
            applied_end = 0 if row is None else row.next_offset
            assert applied_end >= seen, (
                f"the high watermark said {seen} while LMDB had applied below {applied_end}"
            )
            assert seen == 1  # committed 3, queued 1
            assert journal.applicable_end(P0) == 3  # what LMDB may be given meanwhile
        finally:
            go_on.set()
            committer.join(WAIT_S)
        assert not committer.is_alive()
        assert journal.high_watermark(P0) == 3
        journal.wait_applied()
        record = journal.transaction(P0, 5)
        assert record is not None and record.entry_count == 3
    finally:
        journal.close()
