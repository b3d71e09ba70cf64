"""The transaction journal's checkpoint: CHECKPOINT records, their split into parts, the
pointer that names them, and the retention that follows the pointer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from twinlog.engine.base.errors import CorruptJournalError
from twinlog.journal.txn_checkpoint import (
    CHECKPOINT_PART_BYTES_MAX,
    Checkpoint,
    join_parts,
    split_into_parts,
)
from twinlog.journal.txn_checkpoint_pointer import CheckpointPointer, LocalCheckpointPointerFile
from twinlog.journal.txn_journal import TxnJournal
from twinlog.journal.txn_records import (
    Begin,
    CheckpointPart,
    Committed,
    ProducerSnapshot,
    decode,
    encode,
)

snapshots = st.builds(
    ProducerSnapshot,
    st.text(max_size=40),
    st.integers(0, 2**63 - 1),
    st.integers(0, 2**31 - 1),
    st.integers(1, 2**31 - 1),
    st.integers(-1, 2**63 - 1),
    st.sampled_from(["", "COMMITTED", "ABORTED"]),
)


def table(count: int, id_bytes: int = 20) -> tuple[ProducerSnapshot, ...]:
    return tuple(
        ProducerSnapshot(f"{n:0{id_bytes}d}", n << 8, n % 7, 60_000, n * 256 - 1, "COMMITTED")
        for n in range(count)
    )


@given(st.lists(snapshots, max_size=20), st.integers(0, 2**62), st.integers(0, 2**62))
def test_a_checkpoint_record_round_trips(
    producers: list[ProducerSnapshot], replay_from_offset: int, timestamp_ms: int
) -> None:
    record = CheckpointPart(timestamp_ms, replay_from_offset, 0, 1, tuple(producers))
    assert decode(encode(record)) == record


def test_checkpoint_record_bytes() -> None:
    """Pinned layout: type 9, timestamp, replay_from_offset, part, parts, producers."""
    record = CheckpointPart(
        1_700_000_000_000, 4352, 1, 3, (ProducerSnapshot("ab", 512, 2, 60_000, -1, ""),)
    )
    assert encode(record).hex(" ") == (
        "09 00 00 01 8b cf e5 68 00"  # type, timestamp_ms
        " 00 00 00 00 00 00 11 00"  # replay_from_offset 4352
        " 00 00 00 01 00 00 00 03"  # part 1 of 3
        " 00 00 00 01"  # one producer
        " 00 02 61 62"  # "ab"
        " 00 00 00 00 00 00 02 00 00 00 00 02 00 00 ea 60"  # id 512, generation 2, 60000 ms
        " ff ff ff ff ff ff ff ff 00"  # no last transaction, no outcome
    )


def test_an_unknown_last_outcome_code_is_corrupt() -> None:
    data = bytearray(encode(CheckpointPart(0, 0, 0, 1, (ProducerSnapshot("a", 1, 0, 1),))))
    data[-1] = 3
    with pytest.raises(CorruptJournalError, match="last outcome code 3"):
        decode(bytes(data))


def test_a_large_table_is_split_into_parts_each_under_the_limit() -> None:
    producers = table(20_000)  # ~55 bytes each: about 1.1 MB, several default-size parts
    parts = split_into_parts(5, 77, producers)
    assert len(parts) >= 4
    assert all(len(encode(part)) <= CHECKPOINT_PART_BYTES_MAX for part in parts)
    assert [(p.part, p.parts, p.replay_from_offset) for p in parts] == [
        (index, len(parts), 77) for index in range(len(parts))
    ]
    assert join_parts("here", 100, 77, parts) == Checkpoint(77, producers, 100)


def test_an_empty_table_is_one_part_and_a_huge_producer_gets_its_own() -> None:
    assert [p.producers for p in split_into_parts(0, 0, ())] == [()]
    big = ProducerSnapshot("x" * 30_000, 1, 0, 1)
    parts = split_into_parts(0, 0, (*table(2), big, *table(1)), part_bytes_max=1_000)
    assert [len(p.producers) for p in parts] == [2, 1, 1]


@pytest.mark.parametrize(
    ("records", "why"),
    [
        ([], "holds no record there"),
        ([Begin(0, 1, "a", 1, 0, 1, 0)], "is Begin, not a CHECKPOINT"),
        (split_into_parts(0, 3, table(3), 100)[:2], "ends after part 1 of 3"),
        (split_into_parts(0, 3, table(3), 100)[1:], "part 1 of 3 where part 0 of 3"),
        (split_into_parts(0, 4, table(3), 100), "says replay from 4"),
        ([CheckpointPart(0, 3, 0, 0)], "announces 0 parts"),
    ],
)
def test_join_refuses_anything_but_the_whole_checkpoint(records: list[object], why: str) -> None:
    with pytest.raises(CorruptJournalError, match=why):
        join_parts("journal dir", 10, 3, records)


# --- the pointer file ------------------------------------------------------------------------


def test_pointer_file_round_trips_and_is_missing_at_first(tmp_path: Path) -> None:
    store = LocalCheckpointPointerFile(tmp_path / "checkpoint")
    assert store.read() is None
    store.write(CheckpointPointer(40, 12))
    assert store.read() == CheckpointPointer(40, 12)
    document = (tmp_path / "checkpoint").read_bytes().split(b"\n")[0]
    assert json.loads(document) == {"version": 2, "checkpoint_offset": 40, "replay_from_offset": 12}


def test_an_old_checkpoint_file_is_refused_with_its_format_named(tmp_path: Path) -> None:
    """Version 1 held the producer table itself: a typed error, never a crash or a guess."""
    from twinlog.engine.base.atomic_file import replace_file
    from twinlog.engine.base.crc32c import crc32c

    document = json.dumps({"version": 1, "offset": 7, "producers": []}).encode()
    replace_file(tmp_path / "checkpoint", document + b"\n" + f"{crc32c(document):08x}\n".encode())
    with pytest.raises(CorruptJournalError, match="format 1, written by an older twinlog"):
        LocalCheckpointPointerFile(tmp_path / "checkpoint").read()


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"garbage", "no CRC line"),
        (b'{"version":2}\n00000000\n', "CRC mismatch"),
    ],
)
def test_a_damaged_pointer_names_the_file(tmp_path: Path, content: bytes, why: str) -> None:
    (tmp_path / "checkpoint").write_bytes(content)
    with pytest.raises(CorruptJournalError, match=why) as raised:
        LocalCheckpointPointerFile(tmp_path / "checkpoint").read()
    assert str(tmp_path / "checkpoint") in str(raised.value)


def test_a_pointer_replaying_from_after_its_records_is_damaged(tmp_path: Path) -> None:
    store = LocalCheckpointPointerFile(tmp_path / "checkpoint")
    store.write(CheckpointPointer(5, 6))
    with pytest.raises(CorruptJournalError, match="not within"):
        store.read()


# --- the journal: write, read back, retention --------------------------------------------------


def fill(journal: TxnJournal, count: int) -> list[int]:
    return [journal.append(Committed(0, n)) for n in range(count)]


def test_the_journal_writes_parts_then_the_pointer_and_reads_them_back(tmp_path: Path) -> None:
    journal = TxnJournal(tmp_path, checkpoint_part_bytes_max=300)
    fill(journal, 3)
    producers = table(20)
    written = journal.write_checkpoint(9, 1, producers)
    assert written.checkpoint_offset == 3
    assert journal.pointers.read() == CheckpointPointer(3, 1)
    kinds = [type(record).__name__ for _, record in journal.replay(0)]
    assert kinds[:3] == ["Committed"] * 3 and set(kinds[3:]) == {"CheckpointPart"}
    assert len(kinds) - 3 > 2  # several parts
    journal.close()
    reopened = TxnJournal(tmp_path)
    assert reopened.read_checkpoint() == Checkpoint(1, producers, 3)
    reopened.close()


def test_an_unchanged_journal_is_not_checkpointed_again(tmp_path: Path) -> None:
    journal = TxnJournal(tmp_path)
    fill(journal, 2)
    first = journal.write_checkpoint(0, 2, table(1))
    end = journal.end_offset
    assert journal.write_checkpoint(0, 2, table(1)) is first
    assert journal.end_offset == end
    fill(journal, 1)
    assert journal.write_checkpoint(0, 2, table(1)).checkpoint_offset == end + 1
    journal.close()


@pytest.mark.parametrize("where", ["beyond the end", "on another record"])
def test_a_pointer_to_a_missing_record_is_corrupt_journal(tmp_path: Path, where: str) -> None:
    journal = TxnJournal(tmp_path)
    fill(journal, 4)
    offset = 10 if where == "beyond the end" else 2
    journal.pointers.write(CheckpointPointer(offset, 1))
    with pytest.raises(CorruptJournalError, match=f"names offset {offset}") as raised:
        journal.read_checkpoint()
    assert str(tmp_path) in str(raised.value)
    journal.close()


def test_retention_keeps_the_segment_holding_the_replay_offset(tmp_path: Path) -> None:
    """Seed 000: never delete the segment holding the transactional high-watermark."""
    journal = TxnJournal(tmp_path, segment_bytes=400)
    offsets = fill(journal, 40)  # ~80-byte batches: several per segment
    bases_before = sorted(int(path.stem) for path in tmp_path.glob("*.log"))
    replay_from = offsets[25]
    journal.write_checkpoint(0, replay_from, table(2))
    bases = sorted(int(path.stem) for path in tmp_path.glob("*.log"))
    assert len(bases) < len(bases_before)
    assert bases[0] <= replay_from and (len(bases) == 1 or bases[1] > replay_from)
    assert journal.log.log_start_offset == bases[0]
    journal.close()


def test_retention_waits_for_the_pointer(tmp_path: Path) -> None:
    """A pointer that cannot be written deletes nothing: the old pointer's records stay."""

    class Refusing:
        def read(self) -> CheckpointPointer | None:
            return None

        def write(self, pointer: CheckpointPointer) -> None:
            raise OSError("cannot write the pointer")

    journal = TxnJournal(tmp_path, segment_bytes=400, pointers=Refusing())
    fill(journal, 40)
    with pytest.raises(OSError, match="cannot write the pointer"):
        journal.write_checkpoint(0, 38, table(1))
    assert journal.log.log_start_offset == 0
    journal.close()
