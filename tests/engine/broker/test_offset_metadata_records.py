"""Offsets with their metadata and leader epoch in ``__consumer_offsets`` (OffsetValue v1
and v2): the format, old values still read, damage refused, and both kept across
compaction and a restart."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from twinlog.engine.base.errors import CorruptJournalError, OffsetMetadataTooLargeError
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.broker import Broker
from twinlog.engine.broker.group_offsets import (
    decode_offset_value,
    encode_offset_value,
)
from twinlog.engine.groups.group_calls import OffsetAndMetadata

ORDERS0, ORDERS1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
SMALL = {"offsets_segment_bytes": 2048, "offsets_partitions": 2}


def test_a_value_without_metadata_or_epoch_is_version_1_as_every_value_before() -> None:
    # The bytes every commit wrote before version 2: still read, and still written so.
    old = struct.pack(">hqq", 1, 42, 1_700_000_000_000)
    assert decode_offset_value(old) == OffsetAndMetadata(42)
    assert encode_offset_value(OffsetAndMetadata(42), 1_700_000_000_000) == old


def test_a_value_with_metadata_or_epoch_is_version_2_and_round_trips() -> None:
    for committed in (
        OffsetAndMetadata(7, "checkpoint-ü", 3),
        OffsetAndMetadata(7, "", 0),
        OffsetAndMetadata(0, "m", -1),
        OffsetAndMetadata(2**62, "x" * 0x7FFF, 2**31 - 1),
    ):
        value = encode_offset_value(committed, 123)
        assert struct.unpack_from(">h", value)[0] == 2
        assert decode_offset_value(value) == committed
    metadata = "checkpoint-ü".encode()
    assert encode_offset_value(OffsetAndMetadata(7, "checkpoint-ü", 3), 123) == (
        struct.pack(">hqih", 2, 7, 3, len(metadata)) + metadata + struct.pack(">q", 123)
    )


@pytest.mark.parametrize(
    "value",
    [
        b"",
        b"\x00",
        struct.pack(">hqq", 1, 42, 0)[:-1],  # v1 cut short
        struct.pack(">hqq", 1, 42, 0) + b"\x00",  # v1 running on
        struct.pack(">hqq", 3, 42, 0),  # a version not known
        struct.pack(">hqih", 2, 7, 3, 5) + b"abc" + struct.pack(">q", 0),  # metadata past end
        struct.pack(">hqih", 2, 7, 3, 1) + b"a" + struct.pack(">q", 0) + b"!",  # running on
        struct.pack(">hqih", 2, 7, 3, -1) + struct.pack(">q", 0),  # a negative length
        struct.pack(">hqih", 2, 7, 3, 1) + b"\xff" + struct.pack(">q", 0),  # not UTF-8
    ],
)
def test_a_damaged_value_is_refused_with_a_typed_error(value: bytes) -> None:
    with pytest.raises(CorruptJournalError, match="__consumer_offsets"):
        decode_offset_value(value)


def test_metadata_and_epoch_are_kept_through_compaction_and_a_restart(tmp_path: Path) -> None:
    with Broker.open(tmp_path, **SMALL) as broker:
        broker.create_topic("orders", partitions=2)
        for number in range(30):  # enough commits to seal segments for compaction
            broker.commit_offsets(
                "app", {ORDERS0: OffsetAndMetadata(number, f"m{number}", 5), ORDERS1: number}
            )
        broker.scheduler.run_round("compaction")
        expected = {ORDERS0: OffsetAndMetadata(29, "m29", 5), ORDERS1: OffsetAndMetadata(29)}
        assert broker.fetch_committed("app", [ORDERS0, ORDERS1]) == expected
        assert broker.fetch_offsets("app", [ORDERS0]) == {ORDERS0: 29}
    with Broker.open(tmp_path, **SMALL) as broker:
        assert broker.fetch_committed("app", None) == expected


def test_metadata_over_the_limit_refuses_the_commit(tmp_path: Path) -> None:
    with Broker.open(tmp_path, offset_metadata_max_bytes=8) as broker:
        broker.create_topic("orders", partitions=2)
        too_long = {ORDERS0: OffsetAndMetadata(3, "ü" * 5), ORDERS1: 4}  # 10 bytes of UTF-8
        assert broker.metadata_too_large(too_long) == {ORDERS0}
        with pytest.raises(OffsetMetadataTooLargeError, match="offset_metadata_max_bytes"):
            broker.commit_offsets("app", too_long)
        assert broker.fetch_offsets("app", [ORDERS0, ORDERS1]) == {ORDERS0: -1, ORDERS1: -1}
