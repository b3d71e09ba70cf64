"""A copy that is done but not yet recorded APPLIED, and retention.

Recording APPLIED can fail for a moment (a full disk): the copy stays in the
data log, APPLYING in the journal, until a retry records it. Retention then
ran over it in older versions (the partition now bounds it, see
tests/engine/broker/test_retention_applying.py); a data directory left in that
state must still open, and its copy be recorded as applied.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from copier_support import PartitionFixture, transactional_batch

from twinlog.copier.recovery_table import TailState
from twinlog.copier.tail import classify_tail
from twinlog.engine.base import failpoints
from twinlog.engine.base.errors import CorruptJournalError
from twinlog.engine.base.failpoints import FailpointError
from twinlog.engine.log import LogConfig
from twinlog.engine.records.batch_format import BatchHeader, read_header
from twinlog.journal import CopyState

CONFIG = LogConfig(segment_bytes=300, retention_bytes=300, retention_ms=-1)
TRANSACTION = 7
BATCHES = 10


@pytest.fixture
def partition(tmp_path: Path):
    opened = PartitionFixture(tmp_path, log_config=CONFIG)
    yield opened
    opened.close()


def _copy_without_recording_applied(partition: PartitionFixture) -> None:
    partition.journal_transaction(
        TRANSACTION, [transactional_batch(TRANSACTION, 2 * n) for n in range(BATCHES)]
    )
    # APPLYING journaled and applied, APPLIED not even journaled
    failpoints.arm("journal_log.before_append", "raise", on_hit=2)
    with pytest.raises(FailpointError):
        partition.writer.apply_commit(TRANSACTION)
    failpoints.disarm_all()
    record = partition.j.transaction(partition.name, TRANSACTION)
    assert record is not None and record.state is CopyState.APPLYING
    assert partition.log.log_end_offset == 2 * BATCHES  # copied whole


def test_a_copy_whose_start_retention_deleted_is_recorded_applied_at_open(
    partition: PartitionFixture,
) -> None:
    _copy_without_recording_applied(partition)
    # What retention without the partition's bound did: delete the copy's first segments.
    assert partition.log.apply_retention() > 0
    assert partition.log.log_start_offset > 0
    partition.restart()
    record = partition.j.transaction(partition.name, TRANSACTION)
    assert record is not None and record.state is CopyState.APPLIED
    assert record.applied_range == (0, 2 * BATCHES)
    assert partition.log.log_end_offset == 2 * BATCHES  # recorded, not copied again


def test_a_copy_whose_kept_part_differs_is_still_refused(partition: PartitionFixture) -> None:
    _copy_without_recording_applied(partition)
    assert partition.log.apply_retention() > 0
    partition.log.truncate_to(partition.log.log_end_offset - 2)  # the copy's last batch gone
    partition.log.append_as_leader(transactional_batch(TRANSACTION + 1, 0))  # someone else's
    partition.close()

    with pytest.raises(CorruptJournalError, match=r"Retention deleted offsets 0\.\."):
        partition.open()


def test_classify_a_whole_copy_whose_start_is_gone() -> None:
    ours = [transactional_batch(TRANSACTION, 2 * n) for n in range(3)]  # offsets 10..15

    def headers(batches: list[bytes], offset: int) -> list[BatchHeader]:
        found = []
        for one in batches:
            found.append(read_header(one)._replace(base_offset=offset))
            offset = found[-1].next_offset
        return found

    def classify(log_start: int, kept: list[bytes]) -> tuple[TailState, int]:
        journal = iter(headers(ours, 0))
        return classify_tail(10, log_start, 16, iter(headers(kept, log_start)), journal)

    assert classify(12, ours[1:]) == (TailState.WHOLE, 3)
    assert classify(14, ours[2:]) == (TailState.WHOLE, 3)
    assert classify(12, ours[1:2])[0] is TailState.FOREIGN  # a prefix: its start is gone
    assert classify(11, ours[1:])[0] is TailState.FOREIGN  # not at a batch of ours
    other = [transactional_batch(TRANSACTION + 1, 2), ours[2]]
    assert classify(12, other)[0] is TailState.FOREIGN
