"""Kafka's murmur2 partitioning of a whole key column equals the client's, key by key."""

from __future__ import annotations

import pyarrow
from hypothesis import given, settings
from hypothesis import strategies as st

from twinlog.connectors.spark.arrow_partitioner import KEY_BYTES_VECTORISED, partitions_for_keys
from twinlog.rpc.client.partitioner import partition_for_key


@settings(max_examples=200, deadline=None)
@given(
    keys=st.lists(st.binary(max_size=40) | st.binary(min_size=200, max_size=300), max_size=60),
    partitions=st.integers(1, 50),
    cut=st.data(),
)
def test_partitions_for_keys_are_the_clients(
    keys: list[bytes], partitions: int, cut: st.DataObject
) -> None:
    column = pyarrow.array(keys, pyarrow.binary())
    expected = [partition_for_key(key, partitions) for key in keys]
    assert partitions_for_keys(column, partitions).to_pylist() == expected
    # A slice of a larger column (Arrow hands the writer such slices) hashes the same.
    start = cut.draw(st.integers(0, len(keys)))
    end = cut.draw(st.integers(start, len(keys)))
    sliced = column.slice(start, end - start)
    assert partitions_for_keys(sliced, partitions).to_pylist() == expected[start:end]


def test_keys_of_every_length_around_the_steps_and_the_limit() -> None:
    lengths = [*range(0, 20), KEY_BYTES_VECTORISED - 1, KEY_BYTES_VECTORISED]
    keys = [bytes((length * 7 + index) % 256 for index in range(length)) for length in lengths]
    assert partitions_for_keys(pyarrow.array(keys), 1000).to_pylist() == [
        partition_for_key(key, 1000) for key in keys
    ]
    longer = [*keys, b"x" * (KEY_BYTES_VECTORISED + 1)]  # hashed one by one: the same
    assert partitions_for_keys(pyarrow.array(longer), 7).to_pylist() == [
        partition_for_key(key, 7) for key in longer
    ]
