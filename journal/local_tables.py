"""Typed access to the journal's LMDB databases inside one transaction (read or write).

``Tables`` turns keys and values into the records of ``local_format`` and back,
so that no other module packs a struct. It holds no state beyond its LMDB
transaction: it lives exactly as long as that transaction, on its thread.

Values come from transactions opened with ``buffers=True``: they are
memoryviews into the map, valid until the transaction ends or (in a write
transaction) until its next write. Every method decodes what it needs before
returning, except ``entry_value`` whose caller owns that rule.

Partition and transaction rows are cached for the life of the transaction,
and in a write transaction their changes are held back until ``flush``
(called before commit, and before any scan): a group of appends to one
transaction then costs one LMDB put per entry plus one per row, not three
per entry. Fewer LMDB calls matter more than bytes here: each call releases
and retakes the GIL, which the writer thread shares with every caller.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from typing import Any

import lmdb

from twinlog.engine.base.errors import CorruptJournalError
from twinlog.journal.local_format import (
    DB_ENTRIES,
    DB_META,
    DB_PARTITIONS,
    DB_TRANSACTIONS,
    META_U32,
    NO_PREVIOUS,
    CopyRecord,
    CopyState,
    EntryHeader,
    PartitionRow,
    decode_entry_attempt,
    decode_entry_header,
    decode_partition_value,
    decode_transaction_key,
    decode_transaction_value,
    encode_entry_key,
    encode_partition_value,
    encode_transaction_key,
    encode_transaction_value,
)
from twinlog.journal.mapped_pages import PageReleaser

META_NEXT_PARTITION_ID = b"next_partition_id"

Database = Any  # lmdb._Database is private; its handles are opaque to us


class Tables:
    def __init__(
        self,
        txn: lmdb.Transaction,
        databases: dict[bytes, Database],
        releaser: PageReleaser | None = None,
    ) -> None:
        self.txn = txn
        self._releaser = releaser
        self._partitions = databases[DB_PARTITIONS]
        self._entries = databases[DB_ENTRIES]
        self._transactions = databases[DB_TRANSACTIONS]
        self._meta = databases[DB_META]
        self._partition_rows: dict[str, PartitionRow | None] = {}
        self._transaction_rows: dict[tuple[int, int], CopyRecord | None] = {}
        self._dirty_partitions: set[str] = set()
        self._dirty_transactions: set[tuple[int, int]] = set()

    def flush(self) -> None:
        """Write the held-back partition and transaction rows (the cache stays valid)."""
        for name in self._dirty_partitions:
            row = self._partition_rows[name]
            assert row is not None
            self.txn.put(name.encode(), encode_partition_value(row), db=self._partitions)
        for key in self._dirty_transactions:
            record = self._transaction_rows[key]
            assert record is not None
            self.txn.put(
                encode_transaction_key(*key),
                encode_transaction_value(record),
                db=self._transactions,
            )
        self._dirty_partitions.clear()
        self._dirty_transactions.clear()

    # --- partitions -----------------------------------------------------------------

    def partition(self, name: str) -> PartitionRow | None:
        """The row of ``name``, or None if it has no row yet."""
        if name not in self._partition_rows:
            encoded = name.encode()
            value = self.txn.get(encoded, db=self._partitions)
            self._partition_rows[name] = (
                None if value is None else decode_partition_value(value, encoded)
            )
        return self._partition_rows[name]

    def put_partition(self, name: str, row: PartitionRow) -> None:
        self._partition_rows[name] = row
        self._dirty_partitions.add(name)

    def delete_partition(self, name: str) -> None:
        """Forget the partition's row (its entries and transactions are the caller's)."""
        self._partition_rows[name] = None
        self._dirty_partitions.discard(name)
        self.txn.delete(name.encode(), db=self._partitions)

    def allocate_partition_id(self) -> int:
        value = self.txn.get(META_NEXT_PARTITION_ID, db=self._meta)
        partition_id = 0 if value is None else int(META_U32.unpack(value)[0])
        self.txn.put(META_NEXT_PARTITION_ID, META_U32.pack(partition_id + 1), db=self._meta)
        return partition_id

    def partitions(self) -> Iterator[tuple[str, PartitionRow]]:
        """(name, row) of every partition, by name."""
        self.flush()
        with self.txn.cursor(db=self._partitions) as cursor:
            for key, value in cursor:
                name = bytes(key)
                yield name.decode(), decode_partition_value(value, name)

    # --- transactions ---------------------------------------------------------------

    def transaction(self, partition_id: int, name: str, transaction_id: int) -> CopyRecord | None:
        key = (partition_id, transaction_id)
        if key not in self._transaction_rows:
            value = self.txn.get(encode_transaction_key(*key), db=self._transactions)
            self._transaction_rows[key] = (
                None if value is None else decode_transaction_value(value, name, transaction_id)
            )
        return self._transaction_rows[key]

    def put_transaction(self, partition_id: int, record: CopyRecord) -> None:
        key = (partition_id, record.transaction_id)
        self._transaction_rows[key] = record
        self._dirty_transactions.add(key)

    def delete_transaction(self, partition_id: int, transaction_id: int) -> None:
        key = (partition_id, transaction_id)
        self._transaction_rows[key] = None
        self._dirty_transactions.discard(key)
        self.txn.delete(encode_transaction_key(*key), db=self._transactions)

    def transactions(
        self, partition_id: int, name: str, below: int | None = None
    ) -> list[CopyRecord]:
        """Every record of one partition (ids below ``below`` only, if given), by id."""
        self.flush()
        found: list[CopyRecord] = []
        with self.txn.cursor(db=self._transactions) as cursor:
            if not cursor.set_range(encode_transaction_key(partition_id, 0)):
                return found
            for key, value in cursor:
                key_partition, transaction_id = decode_transaction_key(key)
                if key_partition != partition_id or (below is not None and transaction_id >= below):
                    break
                found.append(decode_transaction_value(value, name, transaction_id))
        return found

    # --- entries --------------------------------------------------------------------

    def entry_value(self, partition_id: int, sequence: int) -> memoryview | bytes | None:
        """The raw entry value (a view into the map: valid until the txn ends or writes)."""
        if self._releaser is not None:
            self._releaser.touched()  # before the read: never under a view still in use
        return self.txn.get(encode_entry_key(partition_id, sequence), db=self._entries)

    def entry_header(self, partition_id: int, name: str, sequence: int) -> EntryHeader:
        value = self.entry_value(partition_id, sequence)
        if value is None:
            raise CorruptJournalError(
                f"journal entry {sequence} of {name} is missing though the transaction index "
                "links to it; the journal is damaged (see docs/formats.md, 'Local data journal: Damage')"
            )
        return decode_entry_header(value, f"{sequence} of {name}")

    def put_entry(self, partition_id: int, sequence: int, value: bytes | bytearray) -> None:
        # overwrite=False: a sequence is never reused, so an existing key is a bug
        if not self.txn.put(
            encode_entry_key(partition_id, sequence), value, overwrite=False, db=self._entries
        ):
            raise CorruptJournalError(
                f"journal entry key ({partition_id}, {sequence}) exists already"
            )

    def delete_entry(self, partition_id: int, sequence: int) -> bool:
        if self._releaser is not None:
            self._releaser.touched()  # LMDB reads an overflow value's first page to free it
        return self.txn.delete(encode_entry_key(partition_id, sequence), db=self._entries)

    def walk(self, partition_id: int, record: CopyRecord, chosen_only: bool = False) -> array[int]:
        """Sequences of the transaction's entries in append order, from the reverse links.

        Reads only each entry's fixed header: 8 bytes per entry are kept, never a
        payload. Checks the chain against the record (count, first entry). APPLIED
        and ABORTED transactions own no entries (their counts are history).
        ``chosen_only``: only the entries the record's commit copies (its attempts).
        """
        sequences: array[int] = array("Q")
        if record.state not in (CopyState.OPEN, CopyState.APPLYING):
            return sequences
        filtering = chosen_only and record.attempts is not None
        walked = 0
        last_walked = NO_PREVIOUS
        sequence = record.last_sequence
        while sequence != NO_PREVIOUS:
            if walked >= record.entry_count:
                raise CorruptJournalError(
                    f"journal chain of transaction {record.transaction_id} on {record.partition} "
                    f"is longer than its {record.entry_count} entries (a loop?)"
                )
            value = self.entry_value(partition_id, sequence)
            if value is None:
                raise CorruptJournalError(
                    f"journal entry {sequence} of {record.partition} is missing though the transaction "
                    "index links to it; the journal is damaged (see docs/formats.md, 'Local data journal: Damage')"
                )
            header = decode_entry_header(value, f"{sequence} of {record.partition}")
            if header.transaction_id != record.transaction_id:
                raise CorruptJournalError(
                    f"journal entry {sequence} of {record.partition} belongs to transaction "
                    f"{header.transaction_id}, but transaction {record.transaction_id}'s chain links to it"
                )
            if not filtering or record.copies(decode_entry_attempt(value, header)):
                sequences.append(sequence)
            walked += 1
            last_walked = sequence
            sequence = header.previous
        if walked != record.entry_count or (walked and last_walked != record.first_sequence):
            raise CorruptJournalError(
                f"journal chain of transaction {record.transaction_id} on {record.partition} has "
                f"{walked} entries, the index says {record.entry_count} from "
                f"{record.first_sequence}"
            )
        sequences.reverse()
        return sequences

    def entry_count(self, partition_id: int | None = None) -> int:
        """Entries of one partition (a key-range scan), or of all (LMDB's own count)."""
        if partition_id is None:
            return int(self.txn.stat(self._entries)["entries"])
        count = 0
        with self.txn.cursor(db=self._entries) as cursor:
            if cursor.set_range(encode_entry_key(partition_id, 0)):
                for key in cursor.iternext(keys=True, values=False):
                    if int.from_bytes(bytes(key[:4]), "big") != partition_id:
                        break
                    count += 1
        return count

    def delete_entries(self, partition_id: int) -> int:
        """Delete every entry of one partition (a key-range scan); how many."""
        doomed = []
        with self.txn.cursor(db=self._entries) as cursor:
            if cursor.set_range(encode_entry_key(partition_id, 0)):
                for key in cursor.iternext(keys=True, values=False):
                    if int.from_bytes(bytes(key[:4]), "big") != partition_id:
                        break
                    doomed.append(bytes(key))
        for key in doomed:
            if self._releaser is not None:
                self._releaser.touched()
            self.txn.delete(key, db=self._entries)
        return len(doomed)

    # --- meta -----------------------------------------------------------------------

    def meta_u32(self, key: bytes) -> int | None:
        value = self.txn.get(key, db=self._meta)
        return None if value is None else int(META_U32.unpack(value)[0])

    def put_meta_u32(self, key: bytes, number: int) -> None:
        self.txn.put(key, META_U32.pack(number), db=self._meta)
