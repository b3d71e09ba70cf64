"""``append_columns``: records straight from column buffers in Arrow's binary layout.

The compiled builder and the reference (``binary_column.items``, then ``append_many``)
build the same batch, byte for byte, as ``append_many`` of the rows as bytes; they stop
at the same row under a size limit, and refuse the same inconsistent buffers with the
same message."""

from __future__ import annotations

from array import array
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twinlog.engine.records import batch_builder
from twinlog.engine.records.batch_builder import RecordBatchBuilder
from twinlog.engine.records.batch_format import validate_batch
from twinlog.engine.records.batch_reader import RecordBatch
from twinlog.engine.records.binary_column import BinaryColumn, items

TIMESTAMP_MS = 1_700_000_000_000
Rows = Sequence[bytes | None]


def column_of(rows: Rows, first_row: int = 0, nulls_marked: bool = True) -> BinaryColumn:
    """``rows`` in Arrow's layout, after ``first_row`` rows of padding (a sliced array)."""
    padded = [b"pad"] * first_row + list(rows)
    starts = array("i", [0])
    data = bytearray()
    valid = bytearray((len(padded) + 7) // 8)
    for row, item in enumerate(padded):
        if item is not None:
            data += item
            valid[row >> 3] |= 1 << (row & 7)
        starts.append(len(data))
    has_nulls = any(item is None for item in rows)
    return BinaryColumn(
        len(rows),
        starts.tobytes(),
        bytes(data),
        bytes(valid) if has_nulls or nulls_marked else None,
        first_row,
    )


def _builder() -> RecordBatchBuilder:
    return RecordBatchBuilder("none", producer_id=7, base_sequence=0)


def _by_columns(
    compiled: bool,
    rounds: Sequence[tuple[Rows, Rows | None, int, int | None, int]],
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[bytes, list[int], list[int]]:
    with monkeypatch.context() as patch:
        if not compiled:
            patch.setattr(batch_builder, "_COMPILED", None)
        builder = _builder()
        reached, sizes = [], []
        for number, (values, keys, first_row, size_bytes_max, start) in enumerate(rounds):
            reached.append(
                builder.append_columns(
                    column_of(values, first_row),
                    None if keys is None else column_of(keys, first_row + 1),
                    timestamp_ms=TIMESTAMP_MS + number * 1000,
                    start=start,
                    size_bytes_max=size_bytes_max,
                )
            )
            sizes.append(builder.estimated_size_bytes)
        return builder.build(), reached, sizes


def _by_rows(
    rounds: Sequence[tuple[Rows, Rows | None, int, int | None, int]],
) -> tuple[bytes, list[int], list[int]]:
    """The same rounds through ``append_many`` of the rows as bytes (its Python loop)."""
    builder = _builder()
    reached, sizes = [], []
    for number, (values, keys, _, size_bytes_max, start) in enumerate(rounds):
        taken = builder.append_many(
            list(values[start:]),
            None if keys is None else list(keys[start:]),
            timestamp_ms=TIMESTAMP_MS + number * 1000,
            size_bytes_max=size_bytes_max,
        )
        reached.append(start + taken)
        sizes.append(builder.estimated_size_bytes)
    return builder.build(), reached, sizes


def test_the_installed_builder_encodes_columns_compiled() -> None:
    assert batch_builder._COMPILED is not None
    assert hasattr(batch_builder._COMPILED, "encode_column_records")


a_round = st.integers(1, 12).flatmap(
    lambda count: st.tuples(
        st.lists(st.none() | st.binary(max_size=300), min_size=count, max_size=count),
        st.none() | st.lists(st.none() | st.binary(max_size=40), min_size=count, max_size=count),
        st.integers(0, 9),
        st.none() | st.integers(61, 3000),
        st.integers(0, count),
    )
)


@settings(max_examples=300, deadline=None)
@given(rounds=st.lists(a_round, min_size=1, max_size=4))
def test_columns_build_the_batch_rows_build(
    rounds: list[tuple[Rows, Rows | None, int, int | None, int]],
) -> None:
    if not any(
        start < len(values) for values, _, _, _, start in rounds
    ):  # an empty batch cannot be built
        rounds[0] = (rounds[0][0], rounds[0][1], rounds[0][2], rounds[0][3], 0)
    with pytest.MonkeyPatch.context() as monkeypatch:
        compiled = _by_columns(True, rounds, monkeypatch)
        reference = _by_columns(False, rounds, monkeypatch)
    assert compiled == reference == _by_rows(rounds)
    batch = compiled[0]
    assert len(list(RecordBatch(batch).records())) == validate_batch(batch).record_count


def test_a_column_without_a_validity_buffer_has_no_nulls(monkeypatch: pytest.MonkeyPatch) -> None:
    values: Rows = [b"a", b"", b"ccc" * 100]
    unmarked = column_of(values, first_row=3, nulls_marked=False)
    assert unmarked.valid is None
    for compiled in (True, False):
        with monkeypatch.context() as patch:
            if not compiled:
                patch.setattr(batch_builder, "_COMPILED", None)
            builder = _builder()
            assert builder.append_columns(unmarked, timestamp_ms=TIMESTAMP_MS) == 3
            records = list(RecordBatch(builder.build()).records())
        assert [record.value for record in records] == values
        assert [record.key for record in records] == [None, None, None]


def test_long_items_take_long_varints_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    big = b"v" * 70_000  # a three-byte length varint
    rounds = [([big, None, b"", big], [None, b"k" * 200, b"", None], 2, None, 0)]
    with monkeypatch.context():
        assert (
            _by_columns(True, rounds, monkeypatch)
            == _by_columns(False, rounds, monkeypatch)
            == _by_rows(rounds)
        )


BAD_COLUMNS = {
    "a start beyond the data": BinaryColumn(2, array("i", [0, 2, 9]).tobytes(), b"abcd", None),
    "starts going back": BinaryColumn(2, array("i", [0, 3, 1]).tobytes(), b"abcd", None),
    "a negative start": BinaryColumn(1, array("i", [-1, 2]).tobytes(), b"abcd", None),
    "too few starts": BinaryColumn(3, array("i", [0, 1, 2]).tobytes(), b"abcd", None),
    "too short a validity buffer": BinaryColumn(
        9, array("i", range(10)).tobytes(), b"abcdefghij", b"\xff"
    ),
}


@pytest.mark.parametrize("name", sorted(BAD_COLUMNS))
@pytest.mark.parametrize("as_keys", [False, True])
def test_inconsistent_buffers_are_refused_alike(
    name: str, as_keys: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = BAD_COLUMNS[name]
    good = column_of([b"x"] * bad.rows)
    values, keys = (good, bad) if as_keys else (bad, good)
    messages = []
    for compiled in (True, False):
        with monkeypatch.context() as patch:
            if not compiled:
                patch.setattr(batch_builder, "_COMPILED", None)
            builder = _builder()
            with pytest.raises(ValueError, match="binary column") as refused:
                builder.append_columns(values, keys, timestamp_ms=TIMESTAMP_MS)
            messages.append(str(refused.value))
            # nothing was added: the builder still takes good rows, and its timestamps are theirs
            assert len(builder) == 0
            builder.append_columns(good, timestamp_ms=TIMESTAMP_MS + 5)
            header = validate_batch(builder.build())
            assert header.first_timestamp_ms == TIMESTAMP_MS + 5
    assert messages[0] == messages[1]


def test_a_bad_row_beyond_the_size_limit_is_refused_alike(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The compiled builder checks every row asked for, not only those that fit."""
    starts = array("i", [0, 100, 200, 300, 999]).tobytes()
    values = BinaryColumn(4, starts, bytes(300), None)
    for compiled in (True, False):
        with monkeypatch.context() as patch:
            if not compiled:
                patch.setattr(batch_builder, "_COMPILED", None)
            with pytest.raises(ValueError, match="row 3 spans bytes 300 to 999"):
                _builder().append_columns(values, size_bytes_max=200)


def test_keys_and_values_of_different_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match="one key per value"):
        _builder().append_columns(column_of([b"a", b"b"]), column_of([b"k"]))


def test_rows_out_of_the_column_are_refused() -> None:
    with pytest.raises(ValueError, match="rows 1 to 3 asked of a column of 2 rows"):
        _builder().append_columns(column_of([b"a", b"b"]), start=1, stop=3)


def test_items_reads_what_column_of_wrote() -> None:
    rows: Rows = [b"a", None, b"", b"dd"]
    assert items(column_of(rows, first_row=5), 0, 4) == rows
    assert items(column_of(rows, first_row=5), 1, 3) == [None, b""]
