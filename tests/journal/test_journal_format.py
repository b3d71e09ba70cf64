"""The local data journal's key and value encodings: round trips, the pinned worked example
of docs/formats.md (Local data journal), and damaged values raising CorruptJournalError."""

from __future__ import annotations

from pathlib import Path

import lmdb
import pytest
from copier_support import transactional_batch
from hypothesis import given
from hypothesis import strategies as st

from twinlog.engine.base.errors import CorruptJournalError
from twinlog.journal import JournalLogs, LocalJournal
from twinlog.journal.local_format import (
    DB_ENTRIES,
    ENTRY_FORMAT_IN_LOG,
    ENTRY_HEADER,
    MAX_DBS,
    NO_OFFSET,
    NO_PREVIOUS,
    CopyRecord,
    CopyState,
    EntryHeader,
    PartitionRow,
    decode_entry_attempt,
    decode_entry_header,
    decode_entry_key,
    decode_partition_value,
    decode_transaction_key,
    decode_transaction_value,
    encode_entry_key,
    encode_entry_value,
    encode_partition_value,
    encode_transaction_key,
    encode_transaction_value,
)

u32 = st.integers(0, (1 << 32) - 1)
u64 = st.integers(0, (1 << 64) - 1)
i64 = st.integers(-(1 << 63), (1 << 63) - 1)
i32 = st.integers(-(1 << 31), (1 << 31) - 1)


@given(u32, u64)
def test_entry_key_round_trip(partition_id: int, sequence: int) -> None:
    assert decode_entry_key(encode_entry_key(partition_id, sequence)) == (partition_id, sequence)


@given(u32, st.integers(0, (1 << 63) - 1))
def test_transaction_key_round_trip(partition_id: int, transaction_id: int) -> None:
    key = encode_transaction_key(partition_id, transaction_id)
    assert decode_transaction_key(key) == (partition_id, transaction_id)


@given(st.lists(st.tuples(u32, u64), min_size=2, max_size=20))
def test_entry_keys_sort_like_partition_then_sequence(pairs: list[tuple[int, int]]) -> None:
    # LMDB compares keys bytewise: big-endian makes that numeric order.
    assert sorted(pairs) == sorted(pairs, key=lambda p: encode_entry_key(*p))


@given(u32, u64, i64)
def test_partition_value_round_trip(partition_id: int, next_offset: int, purged_below: int) -> None:
    row = PartitionRow(partition_id, next_offset, purged_below)
    value = encode_partition_value(row)
    assert len(value) == 20
    assert decode_partition_value(value, b"p") == (partition_id, next_offset, purged_below)


@given(i64, u64, i64, i32, i32, st.binary(max_size=40), st.binary(max_size=200))
def test_entry_value_round_trip(
    transaction_id: int,
    previous: int,
    producer_id: int,
    generation: int,
    sequence: int,
    attempt: bytes,
    batch: bytes,
) -> None:
    header = EntryHeader(transaction_id, previous, producer_id, generation, sequence, len(attempt))
    value = encode_entry_value(header, attempt, batch)
    decoded = decode_entry_header(value, "test")
    assert decoded == header
    assert value[ENTRY_HEADER.size : decoded.batch_position] == attempt
    assert decode_entry_attempt(value, decoded) == attempt
    assert value[decoded.batch_position :] == batch


def test_the_journal_stores_what_encode_entry_value_encodes(tmp_path: Path) -> None:
    # The pinned encoder is the one appends run: the stored values are its bytes, with
    # ``previous`` patched by the writer thread (batches kept in LMDB, so whole).
    first, second = transactional_batch(7, 0), transactional_batch(7, 2, producer_generation=3)
    with JournalLogs(LocalJournal.open(tmp_path / "journal", entry_batches="lmdb")) as journal:
        journal.open_partition("p-0", tmp_path / "logs" / "p-0")
        sequences = [
            journal.append("p-0", 7, first, attempt=b"a1"),
            journal.append("p-0", 7, second, producer_id=11, base_sequence=5),
        ]
    stored = _stored_entry_values(tmp_path / "journal")
    producer_id = decode_entry_header(stored[0], "first").producer_id
    assert sequences == [0, 1]
    assert stored == [
        encode_entry_value(EntryHeader(7, NO_PREVIOUS, producer_id, 1, 0, 2), b"a1", first),
        encode_entry_value(EntryHeader(7, 0, 11, 3, 5, 0), b"", second),
    ]


@given(
    st.sampled_from(CopyState),
    u64,
    u64,
    u32,
    u64,
    u64,
    i64,
    i64,
    st.none() | st.lists(st.binary(max_size=30), max_size=5).map(tuple),
)
def test_transaction_value_round_trip(
    state: CopyState,
    first: int,
    last: int,
    count: int,
    size: int,
    records: int,
    first_offset: int,
    next_offset: int,
    attempts: tuple[bytes, ...] | None,
) -> None:
    record = CopyRecord(
        "p-0", 7, state, first, last, count, size, records, first_offset, next_offset, attempts
    )
    assert decode_transaction_value(encode_transaction_value(record), "p-0", 7) == record


def test_worked_example_of_the_format_document() -> None:
    # docs/formats.md (Local data journal), "Worked example": keep both in step.
    key = encode_entry_key(3, 41)
    assert key.hex(" ") == "00 00 00 03 00 00 00 00 00 00 00 29"
    header = EntryHeader(
        transaction_id=0x1234,
        previous=17,
        producer_id=9,
        producer_generation=2,
        base_sequence=5,
        attempt_length=2,
    )
    value = encode_entry_value(header, b"a1", None)
    assert value.hex(" ") == (
        "02"  # format: the batch is in the journal log
        " 00 00 00 00 00 00 12 34"  # transaction_id
        " 00 00 00 00 00 00 00 11"  # previous
        " 00 00 00 00 00 00 00 09"  # producer_id
        " 00 00 00 02"  # producer_generation
        " 00 00 00 05"  # base_sequence
        " 00 02"  # attempt_length
        " 61 31"  # attempt "a1"
    )
    inline = encode_entry_value(header, b"a1", b"<batch>")
    assert inline[:1] == b"\x01" and inline[1:] == value[1:] + b"<batch>"
    record = CopyRecord("orders-0", 0x1234, CopyState.APPLIED, 17, 41, 2, 2048, 20, 100, 120)
    assert encode_transaction_key(3, 0x1234).hex(" ") == "00 00 00 03 00 00 00 00 00 00 12 34"
    assert encode_transaction_value(record).hex(" ") == (
        "03"  # state APPLIED
        " 00 00 00 00 00 00 00 11"  # first_sequence 17
        " 00 00 00 00 00 00 00 29"  # last_sequence 41
        " 00 00 00 02"  # entry_count
        " 00 00 00 00 00 00 08 00"  # size_bytes 2048
        " 00 00 00 00 00 00 00 14"  # record_count 20
        " 00 00 00 00 00 00 00 64"  # first_offset 100
        " 00 00 00 00 00 00 00 78"  # next_offset 120
    )
    chosen = record._replace(attempts=(b"a1",))
    assert encode_transaction_value(chosen)[53:].hex(" ") == (
        "00 01"  # attempt_count
        " 00 02 61 31"  # attempt_length, "a1"
    )


@pytest.mark.parametrize(
    "damage",
    [
        lambda v: v[:10],  # shorter than the fixed header
        lambda v: b"\x07" + v[1:],  # unknown format byte
        lambda v: (
            v[: ENTRY_HEADER.size - 2] + b"\xff\xff" + v[ENTRY_HEADER.size :]
        ),  # attempt longer than value
    ],
    ids=["short", "format", "attempt-length"],
)
def test_damaged_entry_value_raises_corrupt_journal(damage) -> None:
    header = EntryHeader(1, NO_PREVIOUS, 2, 3, 4, 0)
    value = damage(encode_entry_value(header, b"", b"batch"))
    with pytest.raises(CorruptJournalError, match="journal entry"):
        decode_entry_header(value, "3 of p-0")


def test_damaged_transaction_value_raises_corrupt_journal() -> None:
    record = CopyRecord("p", 1, CopyState.OPEN, 0, 0, 1, 1, 1, NO_OFFSET, NO_OFFSET)
    value = encode_transaction_value(record)
    with pytest.raises(CorruptJournalError, match="state 9"):
        decode_transaction_value(b"\x09" + value[1:], "p", 1)
    with pytest.raises(CorruptJournalError, match="bytes, expected at least 53"):
        decode_transaction_value(value[:-1], "p", 1)
    with pytest.raises(CorruptJournalError, match="attempt list cut short"):
        decode_transaction_value(value + b"\x00\x02\x00\x01a", "p", 1)
    with pytest.raises(CorruptJournalError, match="after the attempt list"):
        decode_transaction_value(value + b"\x00\x00\xff", "p", 1)


@given(i64, u64, i64, i32, i32, st.binary(max_size=40))
def test_an_entry_naming_its_batch_in_the_journal_log_holds_header_and_tag_only(
    transaction_id: int, previous: int, producer_id: int, generation: int, sequence: int, tag: bytes
) -> None:
    header = EntryHeader(transaction_id, previous, producer_id, generation, sequence, len(tag))
    value = encode_entry_value(header, tag, None)
    assert value[0] == ENTRY_FORMAT_IN_LOG and len(value) == header.batch_position
    decoded = decode_entry_header(value, "test")
    assert decoded == header._replace(batch_in_log=True)
    assert decode_entry_attempt(value, decoded) == tag
    with pytest.raises(CorruptJournalError, match="names its batch in the journal log"):
        decode_entry_header(bytes(value) + b"x", "test")  # a batch where none may be


def _stored_entry_values(journal_directory: Path) -> list[bytes]:
    with lmdb.open(str(journal_directory), max_dbs=MAX_DBS, readonly=True, lock=False) as env:
        entries = env.open_db(DB_ENTRIES, create=False)
        with env.begin(db=entries) as txn:
            return [bytes(value) for _, value in txn.cursor()]


def test_journal_logs_keep_batches_once_and_read_older_inline_entries(tmp_path: Path) -> None:
    """With journal logs in front, LMDB holds an entry's header and tag and reads the batch
    from the ENTRY record it names; entries an older journal kept inline stay readable, and
    one transaction may hold both."""
    inline, logged = transactional_batch(7, 0), transactional_batch(7, 1)
    journal = JournalLogs(LocalJournal.open(tmp_path / "journal", entry_batches="lmdb"))
    journal.open_partition("p-0", tmp_path / "logs" / "p-0")
    journal.append("p-0", 7, inline, attempt=b"a1")
    journal.close()
    journal = JournalLogs(LocalJournal.open(tmp_path / "journal"))
    journal.open_partition("p-0", tmp_path / "logs" / "p-0")
    journal.append("p-0", 7, logged)
    journal.close()
    inline_value, logged_value = _stored_entry_values(tmp_path / "journal")
    journal = JournalLogs(LocalJournal.open(tmp_path / "journal"))
    try:
        journal.open_partition("p-0", tmp_path / "logs" / "p-0")
        producer_id = decode_entry_header(inline_value, "first").producer_id
        assert inline_value == encode_entry_value(
            EntryHeader(7, NO_PREVIOUS, producer_id, 1, 0, 2), b"a1", inline
        )
        assert logged_value == encode_entry_value(
            EntryHeader(7, 0, producer_id, 1, 1, 0), b"", None
        )
        sequences = journal.sequences("p-0", 7)
        assert [bytes(b) for b in journal.iter_batches("p-0", sequences)] == [inline, logged]
        assert journal.entry("p-0", 1).batch == logged  # type: ignore[union-attr]
        headers = list(journal.iter_tagged_headers("p-0", sequences))
        assert [(tag, header.base_sequence) for tag, header in headers] == [(b"a1", 0), (b"", 1)]
    finally:
        journal.close()


def test_an_entry_naming_a_journal_log_record_that_is_no_entry_is_refused(tmp_path: Path) -> None:
    journal = JournalLogs(LocalJournal.open(tmp_path / "journal"))
    try:
        journal.open_partition("p-0", tmp_path / "logs" / "p-0")
        journal.append("p-0", 7, transactional_batch(7, 0))
        journal.mark_aborted("p-0", 7)  # journal offset 1: a MARK_ABORTED
        with pytest.raises(CorruptJournalError, match="holds no ENTRY there"):
            journal._logged_batch("p-0", 1)
        with pytest.raises(CorruptJournalError, match="journal log ends at 2"):
            journal._logged_batch("p-0", 2)  # past the log's end
    finally:
        journal.close()
