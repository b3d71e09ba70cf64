"""Where a transaction journal's latest checkpoint is: a pointer kept outside the journal.

    CheckpointPointer := {checkpoint_offset: offset of the first CHECKPOINT record,
                          replay_from_offset: where replay starts,
                          low_watermark: in a cluster, below every transaction id this
                                         coordinator has in flight or will hand out}

The checkpoint itself is records of the journal (``twinlog.journal.txn_checkpoint``);
the pointer says which ones. It changes a few times a minute per coordinator and is
tiny, which is what a coordination service holds well: in a cluster it moves to
ZooKeeper (``coordinators/<N>``, with the coordinator epoch and a conditional write),
so coordinators read and write it only through ``CheckpointPointerStore``. The
``MetadataStore`` of the broker hands out one store per journal partition.

The local version is a file, ``DATA_DIR/logs/__txn_journal-N/checkpoint``, replaced atomically:

    pointer  := document "\\n" crc "\\n"
    document := JSON {"version": 2, "checkpoint_offset": int, "replay_from_offset": int}
    crc      := CRC-32C of document, 8 lowercase hex digits

Version 1 of this file held the whole producer table; it is refused with its
version named (the data directory is older than this broker). A damaged pointer
stops the broker with the file named: guessing around it could replay from a
point whose producer table is lost, which would un-fence zombies.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from twinlog.engine.base.atomic_file import replace_file
from twinlog.engine.base.crc32c import crc32c
from twinlog.engine.base.errors import CorruptJournalError

POINTER_VERSION = 2
TABLE_IN_FILE_VERSION = 1  # the producer table in the file itself: not read any more


@dataclass(frozen=True)
class CheckpointPointer:
    checkpoint_offset: int  # the first CHECKPOINT record of the checkpoint
    replay_from_offset: int  # replay starts here; never above checkpoint_offset
    # Published with a cluster coordinator's pointer (CLUSTER.md §3.7): every transaction
    # id it has in flight, or hands out later, is at or above it. None: not published
    # (the local file keeps none: a single-node broker computes its own).
    low_watermark: int | None = None


class CheckpointPointerStore(Protocol):
    """One journal partition's checkpoint pointer, wherever it is kept."""

    def read(self) -> CheckpointPointer | None:
        """The pointer, None if none was ever written; CorruptJournalError if unreadable."""
        ...

    def write(self, pointer: CheckpointPointer) -> None:
        """Replace the pointer durably (called only once its records are durable)."""
        ...


class LocalCheckpointPointerFile:
    """``CheckpointPointerStore`` in a local file, replaced atomically."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def write(self, pointer: CheckpointPointer) -> None:
        document = json.dumps(
            {
                "version": POINTER_VERSION,
                "checkpoint_offset": pointer.checkpoint_offset,
                "replay_from_offset": pointer.replay_from_offset,
            },
            separators=(",", ":"),
        ).encode()
        replace_file(self.path, document + b"\n" + f"{crc32c(document):08x}".encode() + b"\n")

    def read(self) -> CheckpointPointer | None:
        if not self.path.exists():
            return None
        raw = self.path.read_bytes()
        document, _, rest = raw.partition(b"\n")
        try:
            stored_crc = int(rest.strip(), 16)
        except ValueError:
            raise self._damaged("no CRC line") from None
        if crc32c(document) != stored_crc:
            raise self._damaged(
                f"CRC mismatch: file says {stored_crc:08x}, contents give {crc32c(document):08x}"
            )
        try:
            parsed = json.loads(document)
            version = parsed["version"]
            if version == TABLE_IN_FILE_VERSION:
                raise CorruptJournalError(
                    f"{self.path}: transaction journal checkpoint of format {version}, written "
                    "by an older twinlog (the producer table in the file; this version keeps "
                    f"it in the journal and this file, format {POINTER_VERSION}, points to it). "
                    "Open this data directory with the twinlog that wrote it."
                )
            if version != POINTER_VERSION:
                raise self._damaged(f"version {version!r}, expected {POINTER_VERSION}")
            pointer = CheckpointPointer(
                int(parsed["checkpoint_offset"]), int(parsed["replay_from_offset"])
            )
        except (ValueError, KeyError, TypeError) as error:
            raise self._damaged(str(error)) from None
        if not 0 <= pointer.replay_from_offset <= pointer.checkpoint_offset:
            raise self._damaged(
                f"replay_from_offset {pointer.replay_from_offset} is not within "
                f"0..checkpoint_offset {pointer.checkpoint_offset}"
            )
        return pointer

    def _damaged(self, why: str) -> CorruptJournalError:
        return CorruptJournalError(
            f"{self.path}: transaction journal checkpoint pointer is damaged ({why}). Restore "
            "it from a backup; deleting it is safe only if no journal segment was ever deleted "
            "(the journal then replays from its start)."
        )
