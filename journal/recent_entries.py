"""The ENTRY batches a leader journaled lately, kept in memory for the copy.

A committed transaction is copied into the data log within milliseconds of its last
batch being journaled, most often: reading each batch back from the journal log (find
the segment, read, check the record batch's CRC, decode the ENTRY record around it)
was a tenth of the copy's CPU for small transactions. The journal log keeps here, by
(partition, journal offset), the batch of every ENTRY record it appended as leader, up
to ``RECENT_ENTRY_BYTES_MAX`` in all (the oldest go first); the local journal's reader
takes a batch from here when it has it, else from the journal log as before.

Only immutable bytes are kept (``bytes``, or a view of ``bytes``): a caller's reused
buffer could change under the copy. The bytes are the producer's own, which the door
checked (CRC included) before they were journaled; the copy checks them again as it
appends them (``DataLog.append_all_as_leader``).

An offset names another record once the journal log is cut there (a failed
application's repair, a replica's divergent suffix, a restart past the leader's start):
each cut forgets the entries from the cut up (``forget_from``), under the journal log's
order lock, before any record is appended at those offsets again. A journal log that
closes forgets its partition's.

Thread rule: every method takes the one lock; any thread.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

# What the kept batches hold at most, all partitions together: the batches of the
# transactions committed and not yet copied, for a busy broker of small transactions;
# a larger transaction's first batches are read back from the journal log, as before.
RECENT_ENTRY_BYTES_MAX = 16 * 1024 * 1024
# What keeping one batch costs besides its bytes (the key, the tuple, the view, the
# dictionaries' slots), counted against the limit so that tiny batches do not hold more.
ENTRY_OVERHEAD_BYTES = 256


class RecentEntries:
    def __init__(self, bytes_max: int = RECENT_ENTRY_BYTES_MAX) -> None:
        self.bytes_max = bytes_max
        self._lock = threading.Lock()
        # (partition, journal offset) -> (transaction id, batch), oldest first; and each
        # partition's kept offsets, so a cut reads only its own.
        # Invariants: ``_bytes`` is the sum of the kept batches' costs (``_cost``), <=
        # bytes_max; ``_offsets`` holds exactly the keys of ``_kept``, by partition.
        self._kept: OrderedDict[tuple[str, int], tuple[int, memoryview]] = OrderedDict()
        self._offsets: dict[str, set[int]] = {}
        self._bytes = 0

    def put(
        self, partition: str, offset: int, transaction_id: int, batch: bytes | memoryview
    ) -> None:
        """Keep the batch of the ENTRY record just appended at ``offset``, if its bytes
        cannot change (else nothing is kept at that offset: the journal log holds it)."""
        view: memoryview | None = None
        if isinstance(batch, memoryview) and isinstance(batch.obj, bytes):
            view = batch
        elif isinstance(batch, bytes):
            view = memoryview(batch)
        with self._lock:
            self._drop((partition, offset))  # what an earlier record there left, if anything
            if view is None or _cost(view) > self.bytes_max:
                return
            self._kept[(partition, offset)] = (transaction_id, view)
            self._offsets.setdefault(partition, set()).add(offset)
            self._bytes += _cost(view)
            while self._bytes > self.bytes_max:
                self._drop(next(iter(self._kept)))
            assert 0 <= self._bytes <= self.bytes_max, self._bytes

    def get(self, partition: str, offset: int) -> tuple[int, memoryview] | None:
        """(transaction id, batch) of the ENTRY at ``offset``, if kept."""
        with self._lock:
            return self._kept.get((partition, offset))

    def forget_from(self, partition: str, offset: int) -> None:
        """The journal log was cut at ``offset``: its records from there are gone."""
        with self._lock:
            kept = self._offsets.get(partition, ())
            for cut in [each for each in kept if each >= offset]:
                self._drop((partition, cut))

    def _drop(self, key: tuple[str, int]) -> None:
        """Forget one kept batch, if kept (lock held)."""
        dropped = self._kept.pop(key, None)
        if dropped is None:
            return
        self._bytes -= _cost(dropped[1])
        offsets = self._offsets[key[0]]
        offsets.discard(key[1])
        if not offsets:
            del self._offsets[key[0]]

    def forget_partition(self, partition: str) -> None:
        self.forget_from(partition, 0)

    @property
    def kept_bytes(self) -> int:
        with self._lock:
            return self._bytes


def _cost(batch: memoryview) -> int:
    return len(batch) + ENTRY_OVERHEAD_BYTES
