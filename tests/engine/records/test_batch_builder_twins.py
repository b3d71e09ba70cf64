"""The batch builder's two twins: ``append_many`` with the compiled loop builds the same
batch, byte for byte, as with the Python loop (the reference), stops at the same record
under a size limit, and leaves the builder in the same state; it declines (the Python
loop runs) for keys that are not bytes."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twinlog.engine.records import batch_builder
from twinlog.engine.records.batch_builder import RecordBatchBuilder
from twinlog.engine.records.batch_format import validate_batch
from twinlog.engine.records.batch_reader import RecordBatch

TIMESTAMP_MS = 1_700_000_000_000


def _build(
    compiled: bool,
    rounds: Sequence[tuple[list[object], list[object] | None, int | None, int]],
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[bytes, list[int], list[int]]:
    """(the batch, each round's returned index, the estimated size after each round)."""
    with monkeypatch.context() as patch:
        if not compiled:
            patch.setattr(batch_builder, "_COMPILED", None)
        builder = RecordBatchBuilder("none", producer_id=7, base_sequence=0)
        indexes, sizes = [], []
        for number, (values, keys, size_bytes_max, start) in enumerate(rounds):
            indexes.append(
                builder.append_many(
                    values,  # type: ignore[arg-type]
                    keys,  # type: ignore[arg-type]
                    timestamp_ms=TIMESTAMP_MS + number * 1000,
                    start=start,
                    size_bytes_max=size_bytes_max,
                )
            )
            sizes.append(builder.estimated_size_bytes)
        return builder.build(), indexes, sizes


def test_the_installed_builder_is_the_compiled_one() -> None:
    assert batch_builder.COMPILED


buffers = st.binary(max_size=300).flatmap(
    lambda data: st.sampled_from([data, bytearray(data), memoryview(data)])
)
a_round = st.integers(1, 12).flatmap(
    lambda count: st.tuples(
        st.lists(st.none() | buffers, min_size=count, max_size=count),
        st.none() | st.lists(st.none() | st.binary(max_size=40), min_size=count, max_size=count),
        st.none() | st.integers(61, 3000),
        st.integers(0, count - 1),
    )
)


@settings(max_examples=300, deadline=None)
@given(rounds=st.lists(a_round, min_size=1, max_size=4))
def test_the_twins_build_the_same_batch(
    rounds: list[tuple[list[object], list[object] | None, int | None, int]],
) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        compiled = _build(True, rounds, monkeypatch)
        reference = _build(False, rounds, monkeypatch)
    assert compiled == reference
    batch = compiled[0]
    validate_batch(batch)
    assert len(list(RecordBatch(batch).records())) == validate_batch(batch).record_count


def test_keys_that_are_not_bytes_go_to_the_python_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    values: list[object] = [b"a", b"bb", None]
    keys: list[object] = [b"k", bytearray(b"kk"), None]
    assert batch_builder._COMPILED is not None
    parts: list[bytes] = []
    declined = batch_builder._COMPILED.encode_records(
        parts, values, keys, b"\x00\x00", 0, 61, 1 << 62, 0, b"\x00"
    )
    assert declined is None and parts == []  # nothing added
    rounds = [(values, keys, None, 0)]
    assert _build(True, rounds, monkeypatch) == _build(False, rounds, monkeypatch)


def test_large_lengths_take_long_varints_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    big = b"v" * 70_000  # a three-byte length varint
    rounds = [([big, None, b"", big], [None, b"k" * 200, b"", None], None, 0)]
    assert _build(True, rounds, monkeypatch) == _build(False, rounds, monkeypatch)
