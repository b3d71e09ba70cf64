"""A data directory written with the 67-byte batch header of older twinlog versions is
refused, typed and named, and never "recovered" by truncating its logs as damaged."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest
from broker_support import batch

from twinlog.engine.base.atomic_file import read_checked, replace_file, with_checksum
from twinlog.engine.base.crc32c import crc32c
from twinlog.engine.base.errors import DataDirFormatError
from twinlog.engine.broker.broker import Broker
from twinlog.engine.broker.data_dir_format import BATCH_FORMAT_KEY
from twinlog.engine.log import DataLog
from twinlog.engine.log.files import segment_stem
from twinlog.engine.records.batch_builder import encode_record

CONFIG = {"journal_partitions": 1, "offsets_partitions": 1}
# The old header: offset, length, magic, crc, attributes, last delta, timestamps,
# producer id, generation (int32), base sequence, transaction id (int64), record count.
OLD_HEADER = struct.Struct(">qibIhiqqqiiqi")


def old_layout_batch(base_offset: int, value: bytes) -> bytes:
    """A one-record batch exactly as twinlog wrote it before the Kafka layout."""
    records = encode_record(0, 0, None, value, None)
    buffer = bytearray(OLD_HEADER.size) + records
    OLD_HEADER.pack_into(
        buffer, 0, base_offset, len(buffer) - 12, 2, 0, 0, 0, 1_700_000_000_000,
        1_700_000_000_000, -1, -1, -1, -1, 1,
    )  # fmt: skip
    struct.pack_into(">I", buffer, 13, crc32c(bytes(buffer[17:])))
    return bytes(buffer)


def write_old_segment(directory: Path, count: int = 3) -> bytes:
    directory.mkdir(parents=True, exist_ok=True)
    data = b"".join(old_layout_batch(offset, b"old-%d" % offset) for offset in range(count))
    (directory / (segment_stem(0) + ".log")).write_bytes(data)
    return data


def test_the_log_refuses_an_old_segment_instead_of_truncating_it(tmp_path: Path) -> None:
    data = write_old_segment(tmp_path)
    with pytest.raises(DataDirFormatError, match=r"older twinlog.*transaction id"):
        DataLog.open(tmp_path)
    assert (tmp_path / (segment_stem(0) + ".log")).read_bytes() == data  # untouched
    assert not list(tmp_path.glob("*.corrupt"))


def test_a_new_log_whose_leader_epoch_starts_with_byte_2_is_not_taken_for_old(
    tmp_path: Path,
) -> None:
    with DataLog.open(tmp_path, leader_epoch=2 << 24) as log:  # byte 12 is 2, CRC says no
        log.append_as_leader(batch([b"new"]))
    with DataLog.open(tmp_path) as log:
        assert log.log_end_offset == 1


def test_the_broker_refuses_an_old_data_directory_before_opening_anything(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    with Broker.open(data_dir, **CONFIG) as broker:
        broker.create_topic("orders")
        broker.produce("orders", 0, batch([b"new"]))
    meta = data_dir / "meta"
    document = json.loads(read_checked(meta))
    assert document[BATCH_FORMAT_KEY] == 2
    # What an older twinlog left: meta without the key, segments in the old layout.
    del document[BATCH_FORMAT_KEY]
    replace_file(meta, with_checksum(json.dumps(document).encode()))
    partition_dir = data_dir / "logs" / "orders-0"
    for path in partition_dir.iterdir():  # an older twinlog had no journal log here either
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    data = write_old_segment(partition_dir)
    before = sorted(p.relative_to(data_dir) for p in data_dir.rglob("*"))
    with pytest.raises(DataDirFormatError, match=r"orders-0.*older twinlog"):
        Broker.open(data_dir, **CONFIG)
    assert sorted(p.relative_to(data_dir) for p in data_dir.rglob("*")) == before
    assert (partition_dir / (segment_stem(0) + ".log")).read_bytes() == data


def test_a_data_directory_naming_another_batch_format_is_refused(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    Broker.open(data_dir, **CONFIG).close()
    meta = data_dir / "meta"
    document = json.loads(read_checked(meta))
    document[BATCH_FORMAT_KEY] = 1
    replace_file(meta, with_checksum(json.dumps(document).encode()))
    with pytest.raises(DataDirFormatError, match="batch format 1"):
        Broker.open(data_dir, **CONFIG)
