"""``LocalIdSource``: producer ids and transaction ids from blocks kept in a local file.

64-bit, increasing, never reused across restarts (``twinlog.engine.transactions.id_source``).

Ids are handed out from blocks: before the first id of a block is given, the
block's end is written durably to ``DATA_DIR/ids``. After a crash the broker
starts at the persisted end, skipping what was unused of the last block, so no
id is ever handed out twice (as Kafka's producer id blocks). A cluster takes
its blocks from ZooKeeper instead, behind the same ``IdSource`` Protocol.

    ids := JSON {"producer_id": next block start, "transaction_id": next block start}
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from twinlog.engine.base.atomic_file import read_checked, replace_file, with_checksum
from twinlog.engine.base.errors import CorruptJournalError
from twinlog.engine.transactions.id_source import ID_KINDS

BLOCK_SIZE = 1000
KINDS = ID_KINDS


class LocalIdSource:
    """``IdSource`` over ``DATA_DIR/ids``. Thread-safe: any thread may call ``next()``."""

    def __init__(self, path: str | os.PathLike[str], block_size: int = BLOCK_SIZE) -> None:
        self._path = Path(path)
        self._block_size = block_size
        self._lock = threading.Lock()
        self._persisted_end = self._load()
        # Start where the last run's blocks ended: ids of its last block may have been used.
        self._next = dict(self._persisted_end)

    def _load(self) -> dict[str, int]:
        if not self._path.exists():
            return dict.fromkeys(KINDS, 1)
        try:
            stored = json.loads(read_checked(self._path))
            return {kind: int(stored[kind]) for kind in KINDS}
        except (ValueError, KeyError, TypeError) as error:
            raise CorruptJournalError(
                f"{self._path}: id block file is damaged ({error}); restore it from a backup. "
                "Do not delete it: ids could then be handed out twice."
            ) from None

    def next(self, kind: str) -> int:
        """The next id of ``kind`` ("producer_id" or "transaction_id")."""
        with self._lock:
            value = self._next[kind]
            if value >= self._persisted_end[kind]:
                ends = {**self._persisted_end, kind: value + self._block_size}
                # Durable first: if the write fails (DiskFullError on a full disk) the block
                # is not taken, and the next call tries again.
                replace_file(self._path, with_checksum(json.dumps(ends).encode()))
                self._persisted_end = ends
            self._next[kind] = value + 1
            return value

    def peek(self, kind: str) -> int:
        """The id ``next(kind)`` would return (a low watermark when nothing is open)."""
        with self._lock:
            return self._next[kind]


IdAllocator = LocalIdSource  # its name before the IdSource Protocol existed
