"""The transaction journal's checkpoint: where replay starts, and what came before it.

    checkpoint := JSON document, newline, CRC-32C of the document as 8 hex digits, newline
    document   := {"version": 1,
                   "offset": first offset replay must read (the BEGIN of the earliest
                             transaction in flight when it was taken: seed 000's
                             transactional high-watermark; the log end when none was),
                   "producers": [[transactional_id, producer_id, producer_generation,
                                  timeout_ms, last_transaction_id, last_outcome], ...]}

``last_transaction_id`` / ``last_outcome`` ("COMMITTED" or "ABORTED"; -1 / "" for
none) are the producer's last completed transaction, so that a retried commit or
abort whose records lie before ``offset`` still gets its answer after a restart.
Entries of four items (written before these were added) are read as having none.

Records before ``offset`` may be deleted, but INIT_PRODUCER records among them
still matter (fencing needs the latest generation of every transactional id),
so the checkpoint carries the producer table as of ``offset``. Replay applies
the records from ``offset`` on top of it.

The file is replaced atomically; a damaged one stops the broker with the file
named (it is never guessed around: a lost generation would un-fence zombies).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from twinlog.engine.base.atomic_file import replace_file
from twinlog.engine.base.crc32c import crc32c
from twinlog.engine.base.errors import CorruptJournalError

VERSION = 1
LAST_OUTCOMES = ("", "COMMITTED", "ABORTED")


@dataclass(frozen=True)
class ProducerSnapshot:
    transactional_id: str
    producer_id: int
    producer_generation: int
    timeout_ms: int
    last_transaction_id: int = -1
    last_outcome: str = ""


@dataclass(frozen=True)
class Checkpoint:
    offset: int
    producers: tuple[ProducerSnapshot, ...] = field(default=())


def write_checkpoint(path: str | os.PathLike[str], checkpoint: Checkpoint) -> None:
    document = json.dumps(
        {
            "version": VERSION,
            "offset": checkpoint.offset,
            "producers": [
                [
                    p.transactional_id,
                    p.producer_id,
                    p.producer_generation,
                    p.timeout_ms,
                    p.last_transaction_id,
                    p.last_outcome,
                ]
                for p in checkpoint.producers
            ],
        },
        separators=(",", ":"),
    ).encode()
    replace_file(path, document + b"\n" + f"{crc32c(document):08x}".encode() + b"\n")


def read_checkpoint(path: str | os.PathLike[str]) -> Checkpoint | None:
    """The checkpoint at ``path``, None if there is none; CorruptJournalError if damaged."""
    target = Path(path)
    if not target.exists():
        return None
    raw = target.read_bytes()

    def damaged(why: str) -> CorruptJournalError:
        return CorruptJournalError(
            f"{target}: transaction journal checkpoint is damaged ({why}). Restore it from a "
            "backup; deleting it is safe only if no journal segment was ever deleted "
            "(the journal then replays from its start)."
        )

    document, _, rest = raw.partition(b"\n")
    try:
        stored_crc = int(rest.strip(), 16)
    except ValueError:
        raise damaged("no CRC line") from None
    if crc32c(document) != stored_crc:
        raise damaged(
            f"CRC mismatch: file says {stored_crc:08x}, contents give {crc32c(document):08x}"
        )
    try:
        parsed = json.loads(document)
        if parsed["version"] != VERSION:
            raise damaged(f"version {parsed['version']}, expected {VERSION}")
        return Checkpoint(
            offset=int(parsed["offset"]),
            producers=tuple(
                ProducerSnapshot(str(t), int(p), int(g), int(ms), *_last(last))
                for t, p, g, ms, *last in parsed["producers"]
            ),
        )
    except (ValueError, KeyError, TypeError) as error:
        raise damaged(str(error)) from None


def _last(items: list[object]) -> tuple[int, str]:
    """(last_transaction_id, last_outcome) of a producer entry; none in a four-item one."""
    if not items:
        return -1, ""
    transaction_id, outcome = items
    if outcome not in LAST_OUTCOMES:
        raise ValueError(f"last outcome {outcome!r} is not one of {LAST_OUTCOMES}")
    return int(str(transaction_id)), str(outcome)
