"""The local data journal: LMDB, the index of every partition's uncommitted transactional batches.

Their bytes are in the partitions' journal logs, the durable store (LMDB keeps a copy only
with ``entry_batches="lmdb"``, for measurement); LMDB here is an index applied from those
logs, and can be rebuilt from them. It is written only by applying
their records (``enqueue_record``), in each log's offset order, by the journal's writer
thread, which records the partition's applied offset in the same LMDB write
transaction. The journal logs (``journal_log.JournalLog``, opened through
``journal_logs.JournalLogs``) are its one writer; everything else reads.

A transactional produce's ENTRY lands here as a row naming its journal-log record, linked
to the previous entry of the same transaction on the same partition; the transaction index
row is updated in that same transaction. On APPLY_COMMIT the copier walks the links back
from the last entry, streams the batches from the journal log into the data log and records
APPLIED while deleting the entries; on APPLY_ABORT the entries are deleted and ABORTED
recorded. The layout is in ``journal/local_format.py`` and ``docs/formats.md (Local data
journal)``.

    journal = JournalLogs(LocalJournal.open(DATA_DIR / "journal"))
    journal.open_partition("orders-0", DATA_DIR / "orders-0")
    journal.append("orders-0", transaction_id, batch)     # ENTRY: log, then LMDB
    journal.local.transaction("orders-0", transaction_id).state  -> CopyState.OPEN
"""

from __future__ import annotations

import fcntl
import os
import threading
from array import array
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import lmdb

from twinlog.engine.base.errors import (
    CorruptBatchError,
    CorruptJournalError,
    DataDirFormatError,
    InvalidTxnStateError,
    TwinlogError,
)
from twinlog.engine.records.batch_format import BatchHeader, read_header, validate_batch
from twinlog.journal import journal_log_records as records
from twinlog.journal.journal_log_records import JournalLogRecord
from twinlog.journal.lmdb_pages import LmdbPageDamage, check_pages
from twinlog.journal.local_config import BATCHES_IN_LMDB, SYNC_COMMIT, JournalConfig
from twinlog.journal.local_format import (
    DATABASE_NAMES,
    LAYOUT_VERSION,
    MAX_DBS,
    META_FORMAT,
    NO_PREVIOUS,
    PARTITION_NAME_BYTES_MAX,
    CopyRecord,
    CopyState,
    EntryHeader,
    PartitionRow,
    decode_entry_attempt,
    decode_entry_header,
    encode_entry_value,
)
from twinlog.journal.local_ops import (
    AppendEntry,
    Barrier,
    DropPartition,
    MarkAborted,
    MarkApplied,
    MarkApplying,
    Operation,
    PurgeBelow,
)
from twinlog.journal.local_tables import Database, Tables
from twinlog.journal.local_writer import (
    CORRUPTION_ERRORS,
    DATA_FILE,
    GroupWriter,
    PendingWrite,
    translate_lmdb_error,
)
from twinlog.journal.map_backing import back_map_with_file
from twinlog.journal.map_lock import MapLock
from twinlog.journal.mapped_pages import MapAddresses, PageReleaser

LOCK_FILE = "twinlog.lock"
PENDING_STATES = (CopyState.OPEN, CopyState.APPLYING)


class JournalEntry(NamedTuple):
    """One entry, copied out of the map (for tools and tests; the copier streams instead)."""

    partition: str
    sequence: int
    transaction_id: int
    previous: int
    producer_id: int
    producer_generation: int
    base_sequence: int
    attempt: bytes
    batch: bytes


@dataclass(frozen=True)
class JournalUsage:
    """What the journal occupies: read without walking any table (cheap for every scrape)."""

    size_bytes: int  # bytes of the map in use (pages up to the last one written)
    map_size_bytes: int  # current map size (grows when full)
    entry_count: int  # entries of every partition


@dataclass(frozen=True)
class JournalStatistics:
    size_bytes: int  # bytes of the map in use (pages up to the last one written)
    map_size_bytes: int  # current map size (grows when full)
    entry_count: int  # entries of every partition
    open_transactions: int  # OPEN or APPLYING rows
    # partition name -> (entries, batch bytes) of its OPEN and APPLYING transactions
    pending_by_partition: dict[str, tuple[int, int]]
    groups_committed: int  # write transactions committed (one sync each)
    requests_committed: int  # operations (appends, marks, purges) in them
    map_resizes: int


# (partition, sequence) -> (transaction id, batch) of the ENTRY record at that journal offset
LoggedBatchReader = Callable[[str, int], tuple[int, bytes | memoryview]]


class LocalJournal:
    """The local data journal of one broker (one LMDB environment, all partitions).

    Thread rule: any thread may call any method, concurrently. Writes (the
    application of a journal-log record, ``barrier``, ``drop_partition``) are handed
    to the journal's single writer thread,
    which owns every LMDB write transaction (py-lmdb ties a write transaction
    to the thread that began it) and commits the writes of concurrent callers
    as one group with one sync; each caller returns once its group is synced.
    Reads run in the caller's thread, each in its own short read transaction,
    under the shared side of the map lock so that a map resize (exclusive side)
    never unmaps memory a reader is looking at. A read method never calls
    another while it holds its read transaction (the lock is not reentrant).
    ``iter_batches`` is the one long reader: it renews its read transaction
    every ``read_chunk_bytes``.
    """

    def __init__(self, directory: Path, config: JournalConfig) -> None:
        """Use ``LocalJournal.open``."""
        self.directory = directory
        self.config = config
        self._path = str(directory)
        self._data_file = os.path.realpath(directory / DATA_FILE)
        self._map_lock = MapLock()
        self._map_addresses = MapAddresses(self._data_file)
        # name -> id; an id changes only when the partition is dropped and created again
        self._partition_ids: dict[str, int] = {}
        self._partition_ids_lock = threading.Lock()
        # Read transactions older than this (begun before the last drop) may still see a
        # dropped partition's row: they use its id but must not cache it.
        self._partition_ids_valid_from_txn = 0
        self._closed = False
        self._lock_file = self._lock_directory(directory)
        try:
            self._env = self._open_environment()
        except BaseException:
            os.close(self._lock_file)
            raise
        try:
            self._databases = self._open_databases()
        except BaseException:
            self._env.close()
            os.close(self._lock_file)
            raise
        self._writer = GroupWriter(
            self._env, self._databases, config, self._map_lock, self._map_addresses, self._path
        )
        # (partition, sequence) -> the batch of the ENTRY record at journal offset
        # ``sequence``: set by the journal logs (``read_batches_from_logs``). Until then
        # entries keep their batch inline (ENTRY_FORMAT_INLINE), as LMDB used alone must.
        self._logged_batch: LoggedBatchReader | None = None

    def read_batches_from_logs(self, logged_batch: LoggedBatchReader) -> None:
        """From now on, entries applied name their batch by its journal-log record instead
        of holding it (ENTRY_FORMAT_IN_LOG), and ``logged_batch`` reads it back. Entries
        written inline before stay readable."""
        self._logged_batch = logged_batch

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        config: JournalConfig | None = None,
        **overrides: Any,
    ) -> LocalJournal:
        """Open (creating if needed) the journal in ``directory``; ``overrides`` replace config fields."""
        config = (config or JournalConfig()).replace(**overrides)
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        return cls(path, config)

    # --- opening --------------------------------------------------------------------

    def _lock_directory(self, directory: Path) -> int:
        descriptor = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            raise TwinlogError(
                f"the local data journal {directory} is open in another broker (or in this "
                "process already); close that one first"
            ) from None
        return descriptor

    def _damaged(self, error: BaseException | str) -> CorruptJournalError:
        return CorruptJournalError(
            f"cannot open the local data journal {self._path}: {error}. It is a view of the "
            "partitions' journal logs: stop the broker, copy the directory aside, and restore "
            "it from a backup, or move it aside and the broker rebuilds it from the journal "
            "logs at its next start (see docs/formats.md, 'Local data journal: Damage')"
        )

    def _open_environment(self) -> lmdb.Environment:
        try:
            environment = lmdb.open(
                self._path,
                map_size=self.config.map_size_bytes,
                subdir=True,
                max_dbs=MAX_DBS,
                max_readers=self.config.max_readers,
                # "commit": LMDB fsyncs data pages, then writes the meta page synced;
                # "env_sync": we call env.sync(True) once per group instead;
                # "journal_log": only ``sync_to_disk`` syncs (the logs are the durable copy).
                sync=self.config.sync_mode == SYNC_COMMIT,
                metasync=True,
                readahead=False,  # entries are read once, in key order of a chain, not scanned
                meminit=False,  # malloc'd pages are filled before they are written
                writemap=False,  # a stray write through the map cannot corrupt the file
                lock=True,
            )
        except lmdb.Error as error:
            raise self._damaged(error) from error
        try:
            self._check_file_size(environment)  # a file cut short: refused, not extended
            self._check_pages(environment)  # before LMDB writes over a damaged page
            back_map_with_file(self._data_file, environment.info()["map_size"])
        except BaseException:
            environment.close()
            raise
        return environment

    def _check_file_size(self, environment: lmdb.Environment) -> None:
        """Refuse a data file shorter than the pages its meta page says are in use.

        LMDB maps the file and follows page numbers it finds in it (checking them
        against the meta page's last page only): a file cut short would kill the
        process with SIGBUS on the first read past its end, instead of an error.
        """
        last_page = environment.info()["last_pgno"]
        page_bytes = environment.stat()["psize"]
        needed_bytes = (last_page + 1) * page_bytes
        file_bytes = os.stat(self._data_file).st_size
        if file_bytes < needed_bytes:
            raise self._damaged(
                f"{self._data_file} is {file_bytes} bytes, but its meta page says pages "
                f"0..{last_page} ({needed_bytes} bytes) are in use: the file was cut short "
                f"at position {file_bytes}"
            )

    def _check_pages(self, environment: lmdb.Environment) -> None:
        """Refuse a data file whose trees hold a damaged page (``lmdb_pages``): LMDB would
        free the wrong page, or abort the process, on its next write there."""
        try:
            check_pages(self._data_file, environment.stat()["psize"])
        except LmdbPageDamage as damage:
            raise self._damaged(f"{self._data_file}: {damage}") from None

    def _open_databases(self) -> dict[bytes, Database]:
        try:
            with self._env.begin(write=True, buffers=True) as txn:
                databases = {name: self._env.open_db(name, txn=txn) for name in DATABASE_NAMES}
                tables = Tables(txn, databases)
                version = tables.meta_u32(META_FORMAT)
                if version is None:
                    tables.put_meta_u32(META_FORMAT, LAYOUT_VERSION)
                elif version != LAYOUT_VERSION:
                    raise DataDirFormatError(
                        f"local data journal {self._path} has layout version {version}, this "
                        f"broker reads {LAYOUT_VERSION} (version 1 held batches with a "
                        "transaction id in their header); start with an empty data directory, "
                        "or use the broker version that wrote it"
                    )
            return databases
        except lmdb.Error as error:
            raise self._damaged(error) from error

    # --- writes (through the writer thread) ----------------------------------------

    def enqueue_record(
        self,
        partition: str,
        journal_offset: int,
        record: JournalLogRecord,
        make_durable: Callable[[], None] | None = None,
        durable_log: object | None = None,
    ) -> PendingWrite:
        """Queue the application of the journal-log record at ``journal_offset``; ``wait()``
        on the result (the operation's result, or its refusal raised).

        Records of one partition must be queued in offset order, each once: the
        writer applies only the partition's next one (JournalOrderError otherwise).
        ``make_durable`` is called by the writer before the group that applies it;
        ``durable_log`` names the log it syncs (the writer syncs different logs at once).
        """
        _check_partition_name(partition)
        operation = _operation_for(
            partition,
            journal_offset,
            record,
            batch_inline=self._logged_batch is None or self.config.entry_batches == BATCHES_IN_LMDB,
        )
        operation.make_durable = make_durable
        operation.durable_log = durable_log
        return self._writer.enqueue(operation)

    def barrier(self) -> None:
        """Return once every write queued before this call is done (committed or failed):
        at once when none is pending (a leader's promotion and a copier's recovery ask for
        one per partition, thousands at a broker's open)."""
        if self._writer.idle():
            return
        self._writer.submit(Barrier())

    def drop_partition(self, partition: str) -> int:
        """Forget a deleted partition (rows, entries, applied offset); entries dropped."""
        dropped = int(self._writer.submit(DropPartition(partition)))
        with self._partition_ids_lock:  # a topic created again gets a new id
            self._partition_ids_valid_from_txn = self._env.info()["last_txnid"]
            self._partition_ids.pop(partition, None)
        return dropped

    # --- reads (in the caller's thread) --------------------------------------------

    def _reading(self) -> _Reading:
        self._check_open()
        return _Reading(self)

    def _partition_id(self, tables: Tables, partition: str) -> int | None:
        partition_id = self._partition_ids.get(partition)
        if partition_id is None:
            row = tables.partition(partition)
            if row is None:
                return None
            partition_id = row.partition_id
            with self._partition_ids_lock:
                if tables.txn.id() >= self._partition_ids_valid_from_txn:
                    self._partition_ids[partition] = partition_id
        return partition_id

    def partition_row(self, partition: str) -> PartitionRow | None:
        """The partition's row (applied offset, purge watermark), or None if it has none."""
        with self._reading() as tables:
            return tables.partition(partition)

    def applied_offsets(self) -> dict[str, int]:
        """partition -> journal-log offset of the next record to apply, for every partition."""
        with self._reading() as tables:
            return {name: row.next_offset for name, row in tables.partitions()}

    def transaction(self, partition: str, transaction_id: int) -> CopyRecord | None:
        """The index row of ``transaction_id`` on ``partition``, or None."""
        with self._reading() as tables:
            partition_id = self._partition_id(tables, partition)
            return (
                None
                if partition_id is None
                else tables.transaction(partition_id, partition, transaction_id)
            )

    def transactions(
        self, partition: str, states: Iterable[CopyState] | None = None
    ) -> list[CopyRecord]:
        """Index rows of ``partition`` (in ``states`` only, if given), by transaction id."""
        wanted = set(states) if states is not None else set(CopyState)
        with self._reading() as tables:
            partition_id = self._partition_id(tables, partition)
            if partition_id is None:
                return []
            return [r for r in tables.transactions(partition_id, partition) if r.state in wanted]

    def sequences(
        self, partition: str, transaction_id: int, chosen_only: bool = False
    ) -> array[int]:
        """Journal sequences of the transaction's entries in append order (8 bytes each).

        ``chosen_only``: only those its commit copies (the record's attempts).
        """
        with self._reading() as tables:
            partition_id = self._partition_id(tables, partition)
            record = (
                None
                if partition_id is None
                else tables.transaction(partition_id, partition, transaction_id)
            )
            if partition_id is None or record is None:
                return array("Q")
            return tables.walk(partition_id, record, chosen_only)

    def chosen_sequences(self, record: CopyRecord) -> array[int]:
        """``sequences(chosen_only=True)`` of ``record`` as given, not as LMDB holds it: an
        OPEN row with the attempts and start of its MARK_APPLYING, whose application the
        copy does not wait for on a cluster leader (the walk reads the chain, as there)."""
        with self._reading() as tables:
            partition_id = self._partition_id(tables, record.partition)
            if partition_id is None:
                return array("Q")
            return tables.walk(partition_id, record, chosen_only=True)

    def entry(self, partition: str, sequence: int) -> JournalEntry | None:
        with self._reading() as tables:
            partition_id = self._partition_id(tables, partition)
            value = None if partition_id is None else tables.entry_value(partition_id, sequence)
            if value is None:
                return None
            header = decode_entry_header(value, f"{sequence} of {partition}")
            return JournalEntry(
                partition,
                sequence,
                header.transaction_id,
                header.previous,
                header.producer_id,
                header.producer_generation,
                header.base_sequence,
                decode_entry_attempt(value, header),
                bytes(self._batch_of(partition, sequence, header, value)),
            )

    def _batch_of(
        self, partition: str, sequence: int, header: EntryHeader, value: memoryview | bytes
    ) -> memoryview | bytes:
        """The entry's batch: after its tag (inline), or read from its journal-log record."""
        if not header.batch_in_log:
            return value[header.batch_position :]
        if self._logged_batch is None:
            raise CorruptJournalError(
                f"journal entry {sequence} of {partition} keeps its batch in the journal log, "
                f"but {self.directory} was opened without its journal logs"
            )
        transaction_id, batch = self._logged_batch(partition, sequence)
        if transaction_id != header.transaction_id:
            raise CorruptJournalError(
                f"journal entry {sequence} of {partition} belongs to transaction "
                f"{header.transaction_id}, but the journal-log record it names belongs to "
                f"{transaction_id}: LMDB and the journal log disagree (see docs/formats.md, "
                "'Local data journal: Damage')"
            )
        return batch

    def iter_batches(
        self, partition: str, sequences: array[int]
    ) -> Generator[memoryview, None, None]:
        """The batches of ``sequences``, in order, as zero-copy views into the map.

        A view is valid until the next item is requested: consume (write) each
        before asking for the next, and close the iterator when done
        (``contextlib.closing``) so its read transaction ends. Memory stays
        flat: nothing is copied, and every ``read_chunk_bytes`` the read
        transaction is renewed (letting a map resize in) and, if it read batches
        held in LMDB, the pages read so far are released from this process's mapping.
        """
        for _header, _value, batch in self._iter_values(partition, sequences):
            yield memoryview(batch)

    def iter_batch_headers(
        self, partition: str, sequences: array[int]
    ) -> Generator[BatchHeader, None, None]:
        """Batch headers of ``sequences`` in order (each copied: 67 bytes per entry), each
        batch CRC-checked first (``_checked_header``)."""
        for header, _value, batch in self._iter_values(partition, sequences):
            yield self._checked_header(partition, header.transaction_id, batch)

    def iter_tagged_headers(
        self, partition: str, sequences: array[int]
    ) -> Generator[tuple[bytes, BatchHeader], None, None]:
        """(attempt tag, batch header) of ``sequences`` in order; no payload is copied, each
        batch is CRC-checked in place (``_checked_header``)."""
        for header, value, batch in self._iter_values(partition, sequences):
            attempt = decode_entry_attempt(value, header)
            yield attempt, self._checked_header(partition, header.transaction_id, batch)

    def _checked_header(
        self, partition: str, transaction_id: int, batch: memoryview | bytes
    ) -> BatchHeader:
        """The header of ``batch`` after checking its CRC.

        Callers act on these headers (a producer's sequences, a copy's recognition in
        the data log), and LMDB keeps no checksums: the batch CRC is the only guard
        against a flipped bit in a sequence number.
        """
        try:
            return validate_batch(batch, 0)
        except CorruptBatchError as error:
            raise CorruptJournalError(
                f"local data journal {self.directory}: a batch of transaction {transaction_id} on "
                f"{partition} is damaged ({error}); it was not used. LMDB keeps no checksums, the batch "
                "CRC caught it. Stop the broker, copy the journal aside and restore it from a "
                "backup (docs/formats.md, 'Local data journal: Damage')"
            ) from None

    def _iter_values(
        self, partition: str, sequences: array[int]
    ) -> Generator[tuple[EntryHeader, memoryview, memoryview | bytes], None, None]:
        """(header, value, batch) of each entry: views into the map, and the batch from the
        value or its journal-log record."""
        index = 0
        while index < len(sequences):
            # The map's pages are given back after each chunk only if it read batches
            # held in LMDB: an entry whose batch is in the journal log maps a few small
            # pages, and giving them back (madvise over the whole map, then faulting
            # them in again) cost more than the copy's other reads.
            reading = self._reading()
            with reading as tables:
                partition_id = self._partition_id(tables, partition)
                if partition_id is None:
                    raise CorruptJournalError(
                        f"journal has no partition {partition!r} to read entries from"
                    )
                chunk_bytes = 0
                while index < len(sequences) and chunk_bytes < self.config.read_chunk_bytes:
                    sequence = sequences[index]
                    value = tables.entry_value(partition_id, sequence)
                    if value is None:
                        raise CorruptJournalError(
                            f"journal entry {sequence} of {partition} is missing while reading; "
                            "the journal is damaged (see docs/formats.md, 'Local data journal: Damage')"
                        )
                    view = memoryview(value)
                    header = decode_entry_header(view, f"{sequence} of {partition}")
                    if not header.batch_in_log:
                        reading.release_pages = True
                    batch = self._batch_of(partition, sequence, header, view)
                    yield header, view, batch
                    chunk_bytes += len(view) if not header.batch_in_log else len(batch)
                    index += 1
                del value, view, batch  # views into the map must not outlive the read transaction

    def usage(self) -> JournalUsage:
        with self._reading() as tables:
            return self._usage(tables)

    def _usage(self, tables: Tables) -> JournalUsage:
        info = self._env.info()
        return JournalUsage(
            size_bytes=(info["last_pgno"] + 1) * self._env.stat()["psize"],
            map_size_bytes=info["map_size"],
            entry_count=tables.entry_count(),
        )

    def statistics(self) -> JournalStatistics:
        with self._reading() as tables:
            usage = self._usage(tables)
            pending: dict[str, tuple[int, int]] = {}
            open_transactions = 0
            for name, row in tables.partitions():
                partition_id = row.partition_id
                entries = size_bytes = 0
                for record in tables.transactions(partition_id, name):
                    if record.state in PENDING_STATES:
                        open_transactions += 1
                        entries += record.entry_count
                        size_bytes += record.size_bytes
                if entries:
                    pending[name] = (entries, size_bytes)
        return JournalStatistics(
            size_bytes=usage.size_bytes,
            map_size_bytes=usage.map_size_bytes,
            entry_count=usage.entry_count,
            open_transactions=open_transactions,
            pending_by_partition=pending,
            groups_committed=self._writer.groups_committed,
            requests_committed=self._writer.requests_committed,
            map_resizes=self._writer.map_resizes,
        )

    def check(self) -> None:
        """Cross-check entries and index (tests call it after every change); raises CorruptJournalError.

        Every OPEN/APPLYING row's chain is intact and matches its counts, the
        other rows own no entries, every entry belongs to a chain, and every
        sequence (a journal-log offset) is below its partition's applied offset.
        """
        with self._reading() as tables:
            for name, row in tables.partitions():
                partition_id, next_sequence = row.partition_id, row.next_offset
                chained = 0
                for record in tables.transactions(partition_id, name):
                    if record.state in PENDING_STATES:
                        sequences = tables.walk(partition_id, record)
                        if sequences and sequences[-1] >= next_sequence:
                            raise CorruptJournalError(
                                f"{name}: entry {sequences[-1]} is not below the applied offset "
                                f"{next_sequence}"
                            )
                        chained += len(sequences)
                stored = tables.entry_count(partition_id)
                if stored != chained:
                    raise CorruptJournalError(
                        f"{name}: {stored} entries stored, {chained} reachable from the index "
                        "(orphans or lost entries)"
                    )

    # --- life cycle -----------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise TwinlogError(f"the local data journal {self._path} is closed; reopen it")

    def sync_to_disk(self) -> None:
        """Make every committed write durable (one env.sync). Whatever was read from LMDB
        before this call is on disk when it returns: call it before trusting an applied
        offset as durable (journal-log retention, in the "journal_log" sync mode)."""
        self._check_open()
        with self._map_lock.shared():
            self._env.sync(True)

    def close(self) -> None:
        """Finish queued writes, stop the writer, sync and close LMDB. Idempotent."""
        if self._closed:
            return
        self._writer.close()
        with self._map_lock.exclusive():
            self._closed = True
            try:
                self._env.sync(True)  # a no-op cost in the synced modes; needed in "journal_log"
            finally:
                self._env.close()
        os.close(self._lock_file)

    def __enter__(self) -> LocalJournal:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # used by _Reading
    def _begin_read(self) -> lmdb.Transaction:
        try:
            return self._env.begin(buffers=True)
        except CORRUPTION_ERRORS as error:
            raise translate_lmdb_error(error, self._path, "reading") from error


class _Reading:
    """A read transaction under the map lock's shared side; yields ``Tables``."""

    def __init__(self, journal: LocalJournal) -> None:
        self._journal = journal
        # Set while reading (a batch held in LMDB was read): the pages go at exit.
        self.release_pages = False
        self._shared = journal._map_lock.shared()
        self._txn: lmdb.Transaction | None = None
        self._tables: Tables | None = None
        self._releaser: PageReleaser | None = None

    def __enter__(self) -> Tables:
        self._shared.__enter__()
        try:
            if self._journal._closed:
                raise TwinlogError(
                    f"the local data journal {self._journal._path} is closed; reopen it"
                )
            self._txn = self._journal._begin_read()
            self._releaser = PageReleaser(self._journal._map_addresses)
            self._tables = Tables(self._txn, self._journal._databases, self._releaser)
            return self._tables
        except BaseException:
            self._shared.__exit__(None, None, None)
            raise

    def __exit__(self, exc_type: Any, error: BaseException | None, traceback: Any) -> None:
        try:
            if self._txn is not None:
                self._txn.abort()
            if self._releaser is not None and (self.release_pages or self._releaser.releases):
                self._releaser.release()
        finally:
            self._shared.__exit__(exc_type, error, traceback)
        if isinstance(error, lmdb.Error):
            # A read of a damaged map fails with whatever LMDB tripped on first
            # (MDB_CORRUPTED, MDB_PAGE_NOTFOUND, or MDB_BAD_TXN once a failed
            # lookup has poisoned the read transaction): one typed error for all.
            raise CorruptJournalError(
                f"local data journal {self._journal._path} is damaged: a read failed with "
                f"{type(error).__name__}: {error}. Stop the broker, copy the directory aside, "
                "and restore it from a backup (docs/formats.md, 'Local data journal: Damage')"
            ) from error


def _operation_for(
    partition: str, journal_offset: int, record: JournalLogRecord, batch_inline: bool
) -> Operation:
    """The LMDB write that applies ``record`` (at ``journal_offset`` of ``partition``);
    an ENTRY's batch is kept in LMDB only with ``batch_inline``."""
    if isinstance(record, records.Entry):
        entry = EntryHeader(
            transaction_id=record.transaction_id,
            previous=NO_PREVIOUS,  # the writer patches it
            producer_id=record.producer_id,
            producer_generation=record.producer_generation,
            base_sequence=record.base_sequence,
            attempt_length=len(record.attempt),
        )
        # Built here, in the caller's thread: the writer thread only patches 8 bytes.
        value = encode_entry_value(entry, record.attempt, record.batch if batch_inline else None)
        record_count = read_header(record.batch).record_count
        return AppendEntry(
            partition, record.transaction_id, journal_offset, value, len(record.batch), record_count
        )
    if isinstance(record, records.MarkApplying):
        return MarkApplying(
            partition, record.transaction_id, journal_offset, record.start_offset, record.attempts
        )
    if isinstance(record, records.MarkApplied):
        return MarkApplied(
            partition,
            record.transaction_id,
            journal_offset,
            record.first_offset,
            record.next_offset,
        )
    if isinstance(record, records.MarkAborted):
        return MarkAborted(partition, record.transaction_id, journal_offset)
    return PurgeBelow(partition, record.low_watermark, journal_offset)


def _check_partition_name(partition: str) -> None:
    encoded_bytes = len(partition.encode())
    if not 1 <= encoded_bytes <= PARTITION_NAME_BYTES_MAX:
        raise InvalidTxnStateError(
            f"partition name {partition[:40]!r} is {encoded_bytes} bytes in UTF-8; expected "
            f"1..{PARTITION_NAME_BYTES_MAX}"
        )


__all__ = [
    "CopyRecord",
    "CopyState",
    "JournalEntry",
    "JournalStatistics",
    "LocalJournal",
]
