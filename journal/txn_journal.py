"""The transaction journal: the coordinator's log of decisions, one per journal partition.

It is stored like a data log (``twinlog.engine.log``: segments, indexes, CRCs,
recovery), in ``DATA_DIR/txn/<journal partition>/``, one batch per record
(``twinlog.journal.txn_records``). Every append is fsynced before it returns: the
coordinator answers a producer only after its decision is durable.

Thread rule: one coordinator thread appends at a time (the coordinator holds
its lock); ``replay`` runs at start-up before any append.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from twinlog.engine.base.errors import CorruptJournalError
from twinlog.engine.log import DataLog, LogConfig
from twinlog.engine.records.batch_builder import RecordBatchBuilder
from twinlog.engine.records.batch_reader import iter_batches
from twinlog.journal.txn_checkpoint import Checkpoint, read_checkpoint, write_checkpoint
from twinlog.journal.txn_records import CoordinatorRecord, decode, encode

CHECKPOINT_FILE = "checkpoint"
REPLAY_READ_BYTES = 1 << 20
# Journal records are small; small segments let the checkpoint free space soon.
TXN_JOURNAL_SEGMENT_BYTES = 64 * 1024 * 1024


class TxnJournal:
    def __init__(
        self, directory: str | os.PathLike[str], segment_bytes: int = TXN_JOURNAL_SEGMENT_BYTES
    ) -> None:
        self.directory = Path(directory)
        config = LogConfig(
            segment_bytes=segment_bytes,
            retention_bytes=-1,
            retention_ms=-1,
            flush_policy="every_append",
        )
        self.log = DataLog.open(self.directory, config)
        self._checkpoint_path = self.directory / CHECKPOINT_FILE

    def append(self, record: CoordinatorRecord) -> int:
        """Append and fsync one record; return its offset."""
        builder = RecordBatchBuilder("none")
        builder.append(encode(record), timestamp_ms=record.timestamp_ms)
        return self.log.append(builder.build())

    def replay(self, from_offset: int) -> Iterator[tuple[int, CoordinatorRecord]]:
        """(offset, record) of every record from ``from_offset`` to the end."""
        offset = max(from_offset, self.log.log_start_offset)
        if from_offset < self.log.log_start_offset:
            raise CorruptJournalError(
                f"{self.directory}: replay must start at offset {from_offset}, but the journal "
                f"starts at {self.log.log_start_offset} (segments were lost)"
            )
        end = self.log.log_end_offset
        while offset < end:
            chunk = self.log.read(offset, REPLAY_READ_BYTES)
            if not chunk:
                break
            for batch in iter_batches(chunk):
                for record in batch.records():
                    if record.offset >= offset:
                        if record.value is None:
                            raise CorruptJournalError(
                                f"{self.directory}: journal record at offset {record.offset} is empty"
                            )
                        yield record.offset, decode(record.value)
                offset = batch.header.next_offset

    @property
    def end_offset(self) -> int:
        return self.log.log_end_offset

    def read_checkpoint(self) -> Checkpoint | None:
        return read_checkpoint(self._checkpoint_path)

    def write_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Persist the checkpoint, then delete segments wholly before its offset."""
        write_checkpoint(self._checkpoint_path, checkpoint)
        self.log.delete_segments_before(checkpoint.offset)

    def size_bytes(self) -> int:
        return self.log.size_bytes()

    def close(self) -> None:
        self.log.close()
