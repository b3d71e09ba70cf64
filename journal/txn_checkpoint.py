"""The transaction journal's checkpoint: where replay starts, and what came before it.

A checkpoint is a set of CHECKPOINT records in the journal itself
(``twinlog.journal.txn_records.CheckpointPart``), so that it is replicated with
the journal, plus a small pointer to them kept outside the journal
(``twinlog.journal.txn_checkpoint_pointer``):

    records:  CHECKPOINT part 0 of n, ..., part n-1 of n     consecutive, one append
              each with replay_from_offset and a slice of the producer table
    pointer:  {checkpoint_offset: offset of part 0, replay_from_offset}

``replay_from_offset`` is the BEGIN of the earliest transaction in flight when the
checkpoint was taken (seed 000's transactional high-watermark), or the log end
when none was. Records before it may be deleted, but INIT_PRODUCER records among
them still matter (fencing needs the latest generation of every transactional id),
so the checkpoint carries the producer table as of ``checkpoint_offset``. Replay
loads that table, then applies the records from ``replay_from_offset`` on,
skipping the INIT_PRODUCER records before ``checkpoint_offset`` (the table holds
them) and every CHECKPOINT record.

The pointer is written only after its records are durable: a crash in between
leaves the previous pointer, whose records retention has not touched yet.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from twinlog.engine.base.errors import CorruptJournalError
from twinlog.journal.txn_records import (
    CHECKPOINT_PART_OVERHEAD_BYTES,
    CheckpointPart,
    ProducerSnapshot,
    encoded_producer_bytes,
)

# A part's encoded size stays below this (a producer larger than it gets a part of its
# own; a transactional id is at most 32 KiB). Far under any batch limit (8 MiB by
# default), so a part never meets BatchTooLargeError and a follower fetches it whole.
CHECKPOINT_PART_BYTES_MAX = 256 * 1024

__all__ = ["Checkpoint", "ProducerSnapshot", "join_parts", "split_into_parts"]


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint as replay uses it. ``checkpoint_offset`` is where its records start."""

    replay_from_offset: int
    producers: tuple[ProducerSnapshot, ...] = field(default=())
    checkpoint_offset: int = -1


def split_into_parts(
    timestamp_ms: int,
    replay_from_offset: int,
    producers: Sequence[ProducerSnapshot],
    part_bytes_max: int = CHECKPOINT_PART_BYTES_MAX,
) -> list[CheckpointPart]:
    """The CHECKPOINT records holding ``producers``, each below ``part_bytes_max`` encoded."""
    slices: list[list[ProducerSnapshot]] = [[]]
    size = CHECKPOINT_PART_OVERHEAD_BYTES
    for producer in producers:
        producer_bytes = encoded_producer_bytes(producer)
        if slices[-1] and size + producer_bytes > part_bytes_max:
            slices.append([])
            size = CHECKPOINT_PART_OVERHEAD_BYTES
        slices[-1].append(producer)
        size += producer_bytes
    return [
        CheckpointPart(timestamp_ms, replay_from_offset, index, len(slices), tuple(chunk))
        for index, chunk in enumerate(slices)
    ]


def join_parts(
    where: str, checkpoint_offset: int, replay_from_offset: int, parts: Iterable[object]
) -> Checkpoint:
    """The checkpoint that the records from ``checkpoint_offset`` on hold.

    ``parts`` are the records from that offset, in order; only as many are read as
    the first one announces. Anything else than parts 0..n-1 of one checkpoint
    agreeing with the pointer's ``replay_from_offset`` is CorruptJournalError.
    """

    def damaged(why: str) -> CorruptJournalError:
        return CorruptJournalError(
            f"{where}: the checkpoint pointer names offset {checkpoint_offset} "
            f"(replay from {replay_from_offset}), but {why}. The journal lost records the "
            "pointer was written after; restore the journal from a backup. Deleting the "
            "pointer is safe only if the journal still starts at offset 0 (it then replays "
            "from its start)."
        )

    producers: list[ProducerSnapshot] = []
    expected_parts = None
    part_index = 0
    for record in parts:
        if not isinstance(record, CheckpointPart):
            raise damaged(
                f"record {part_index} from there is {type(record).__name__}, not a CHECKPOINT"
            )
        if expected_parts is None:
            expected_parts = record.parts
            if expected_parts < 1:
                raise damaged(f"its first CHECKPOINT record announces {expected_parts} parts")
        if (record.part, record.parts) != (part_index, expected_parts):
            raise damaged(
                f"it holds part {record.part} of {record.parts} where part {part_index} of "
                f"{expected_parts} belongs"
            )
        if record.replay_from_offset != replay_from_offset:
            raise damaged(f"its part {part_index} says replay from {record.replay_from_offset}")
        producers.extend(record.producers)
        part_index += 1
        if part_index == expected_parts:
            return Checkpoint(replay_from_offset, tuple(producers), checkpoint_offset)
    if expected_parts is None:
        raise damaged("the journal holds no record there")
    raise damaged(f"the journal ends after part {part_index - 1} of {expected_parts}")
