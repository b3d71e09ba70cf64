"""The record batch format: round trips, pinned bytes, and typed errors for bad bytes."""

from __future__ import annotations

import os
import random
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from checkout import ROOT
from hypothesis import given, settings
from hypothesis import strategies as st

from twinlog.engine.base.crc32c import (
    CHECK_VALUE,
    FORCE_REFERENCE_ENV,
    IMPLEMENTATION,
    USING_C_EXTENSION,
    crc32c,
    reference_crc32c,
)
from twinlog.engine.base.errors import CorruptBatchError
from twinlog.engine.broker.broker import Broker
from twinlog.engine.records.batch_builder import RecordBatchBuilder, build_batch
from twinlog.engine.records.batch_format import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    HEADER_BYTES,
    MAGIC_OFFSET,
    NO_PARTITION_LEADER_EPOCH,
    BatchHeader,
    check_producer_batch,
    encode_header,
    pack_header,
    read_header,
    unpack_header,
    validate_batch,
    with_log_position,
)
from twinlog.engine.records.batch_reader import RecordBatch, iter_batches
from twinlog.engine.records.compression import CODEC_BY_NAME, CODEC_NONE
from twinlog.engine.records.varint import decode_varint, encode_varint, encode_varlong


def test_crc32c_check_value() -> None:
    assert crc32c(b"123456789") == CHECK_VALUE == 0xE3069283


def test_crc32c_continues_over_pieces() -> None:
    assert crc32c(b"6789", crc32c(b"12345")) == 0xE3069283


def test_the_hardware_crc_is_in_use() -> None:
    # Installed by twinlog[fast] (in [all], so in CI); crcmod stays the reference.
    assert IMPLEMENTATION == "google-crc32c (hardware)"


def test_the_fast_crc_equals_crcmod_on_random_inputs_and_pieces() -> None:
    generator = random.Random(1234)
    sizes = [0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1023, 4096, 65_536, 1_048_583]
    for size in sizes:
        data = generator.randbytes(size)
        previous = generator.getrandbits(32)
        expected = reference_crc32c(data)
        assert crc32c(data) == expected, size
        assert crc32c(bytearray(data)) == expected, size
        assert crc32c(memoryview(data)[0:]) == expected, size
        assert crc32c(data, previous) == reference_crc32c(data, previous), size
        cut = generator.randint(0, size)
        assert crc32c(memoryview(data)[cut:], crc32c(data[:cut])) == expected, size


def test_the_fast_crc_equals_crcmod_on_pinned_inputs() -> None:
    # RFC 3720 B.4's test vectors: 32 zeros, 32 0xFF, 0..31 ascending, 31..0 descending.
    pinned = {
        bytes(32): 0x8A9136AA,
        b"\xff" * 32: 0x62A8AB43,
        bytes(range(32)): 0x46DD794E,
        bytes(range(31, -1, -1)): 0x113FDB5C,
    }
    for data, expected in pinned.items():
        assert crc32c(data) == reference_crc32c(data) == expected


def test_the_reference_can_be_forced_by_the_environment() -> None:
    code = "import twinlog.engine.base.crc32c as c\nprint(c.IMPLEMENTATION)\n"
    assert _run_python(code).stdout.strip() == "google-crc32c (hardware)"
    forced = _run_python(code, env={FORCE_REFERENCE_ENV: "crcmod"})
    assert forced.stdout.strip() == "crcmod C extension", forced.stderr


def test_crcmod_uses_its_c_extension() -> None:
    # The pure-Python fallback is ~45x slower; an install without it is a broken install.
    assert USING_C_EXTENSION


# Run before importing engine.crc32c in a fresh interpreter: crcmod then finds no
# C extension, as on a machine where it did not compile.
_BLOCK_C_EXTENSION = """
import sys

class RefuseCrcmodExtension:
    def find_spec(self, name, path=None, target=None):
        if name == "crcmod._crcfunext":
            raise ImportError("blocked for this test")
        return None

sys.meta_path.insert(0, RefuseCrcmodExtension())
"""


def _run_python(
    code: str, *options: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *options, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONWARNINGS": "default", **(env or {})},
    )


def test_without_the_c_extension_the_import_warns_loudly() -> None:
    code = _BLOCK_C_EXTENSION + (
        "import twinlog.engine.base.crc32c as c\n"
        "assert not c.USING_C_EXTENSION\n"
        "assert c.crc32c(c.CHECK_INPUT) == c.CHECK_VALUE  # slow, but right\n"
        "print('imported')\n"
    )
    # With the fast CRC installed, crcmod's fallback is not used and nothing warns;
    # forced to the reference, the missing extension is the slow path and is named.
    result = _run_python(code, env={FORCE_REFERENCE_ENV: "crcmod"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "imported"
    assert "RuntimeWarning" in result.stderr
    assert "WITHOUT its C extension" in result.stderr
    assert "pip install --force-reinstall --no-binary crcmod crcmod" in result.stderr


@pytest.mark.parametrize("options", [(), ("-O",)], ids=["plain", "optimized"])
def test_a_crc_failing_its_check_value_refuses_to_import(options: tuple[str, ...]) -> None:
    # -O strips asserts: the check value must still be checked there.
    code = (
        "import crcmod.predefined\n"
        "crcmod.predefined.mkCrcFun = lambda name: lambda data, crc=0: 0\n"
        "import twinlog.engine.base.crc32c\n"
    )
    result = _run_python(code, *options)
    assert result.returncode != 0
    assert "ImportError" in result.stderr
    assert "expected 0xe3069283" in result.stderr


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (-2, b"\x03"),
        (63, b"\x7e"),
        (64, b"\x80\x01"),
        (300, b"\xd8\x04"),
        (-(1 << 63), b"\xff" * 9 + b"\x01"),
    ],
)
def test_varint_pinned(value: int, encoded: bytes) -> None:
    assert encode_varint(value) == encoded
    assert decode_varint(encoded, 0) == (value, len(encoded))


@given(st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1))
def test_varlong_round_trip(value: int) -> None:
    encoded = encode_varlong(value)
    assert encode_varint(value) == encoded
    assert decode_varint(encoded, 0) == (value, len(encoded))


def test_varint_errors_are_typed() -> None:
    with pytest.raises(CorruptBatchError, match="runs past the end"):
        decode_varint(b"\x80\x80", 0)
    with pytest.raises(CorruptBatchError, match="longer than 5 bytes"):
        decode_varint(b"\xff" * 6, 0, 5)


@pytest.mark.parametrize(
    "encoded",
    [b"\x80" * 9 + b"\x02", b"\xff" * 9 + b"\x7f", b"\xff" * 9 + b"\x03"],
    ids=["2**64", "2**70-1", "2**65-1"],
)
def test_varint_beyond_64_bits_is_refused(encoded: bytes) -> None:
    # Ten 7-bit groups hold 70 bits; only 64 may be used. The largest legal one,
    # ff*9 01 (-2**63), is pinned above.
    with pytest.raises(CorruptBatchError, match="more than the 64"):
        decode_varint(encoded, 0)


# --- round trips -------------------------------------------------------------

optional_bytes = st.none() | st.binary(max_size=300)
headers = st.lists(st.tuples(st.text(max_size=20), optional_bytes), max_size=4)
records = st.lists(
    st.tuples(optional_bytes, optional_bytes, headers, st.integers(0, (1 << 41))),
    min_size=1,
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(
    records=records,
    compression=st.sampled_from(list(CODEC_BY_NAME)),
    producer_id=st.integers(-1, (1 << 63) - 1),
    producer_generation=st.integers(-1, (1 << 15) - 1),
    base_sequence=st.integers(-1, (1 << 31) - 1),
    transactional=st.booleans(),
    base_offset=st.integers(0, 1 << 62),
    partition_leader_epoch=st.integers(0, (1 << 31) - 1),
)
def test_batch_round_trip(
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]],
    compression: str,
    producer_id: int,
    producer_generation: int,
    base_sequence: int,
    transactional: bool,
    base_offset: int,
    partition_leader_epoch: int,
) -> None:
    builder = RecordBatchBuilder(
        compression,
        producer_id=producer_id,
        producer_generation=producer_generation,
        base_sequence=base_sequence,
        transactional=transactional,
    )
    for key, value, record_headers, timestamp_ms in records:
        builder.append(value, key=key, headers=record_headers, timestamp_ms=timestamp_ms)
    built = builder.build()
    assert unpack_header(built).partition_leader_epoch == NO_PARTITION_LEADER_EPOCH
    pieces = with_log_position(built, base_offset, partition_leader_epoch)
    assert len(bytes(pieces[0])) == 16  # only offset, length and epoch are new bytes
    patched = b"".join(bytes(piece) for piece in pieces)

    batch = RecordBatch(patched)  # checks the CRC: stamping did not break it
    header = batch.header
    assert header.base_offset == base_offset
    assert header.partition_leader_epoch == partition_leader_epoch
    assert header.record_count == len(records) == header.last_offset_delta + 1
    assert header.codec == CODEC_BY_NAME[compression]
    assert (header.producer_id, header.producer_generation, header.base_sequence) == (
        producer_id,
        producer_generation,
        base_sequence,
    )
    assert header.is_transactional == transactional
    assert header.first_timestamp_ms == records[0][3]
    assert header.max_timestamp_ms == max(r[3] for r in records)
    decoded = list(batch.records())
    assert [(r.key, r.value, [tuple(h) for h in r.headers], r.timestamp_ms) for r in decoded] == [
        (key, value, record_headers, timestamp_ms)
        for key, value, record_headers, timestamp_ms in records
    ]
    assert [r.offset for r in decoded] == list(range(base_offset, base_offset + len(records)))


def test_empty_batch_is_refused() -> None:
    with pytest.raises(ValueError, match="empty"):
        RecordBatchBuilder("none").build()


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_a_built_builder_refuses_more_work(compression: str) -> None:
    # Appending after build() once produced a batch whose CRC was right and whose
    # records were garbage; a second build() raised struct.error.
    builder = RecordBatchBuilder(compression)
    builder.append(b"first")
    built = builder.build()
    with pytest.raises(RuntimeError, match="built already"):
        builder.append(b"second")
    with pytest.raises(RuntimeError, match="built already"):
        builder.build()
    assert [r.value for r in RecordBatch(built).records()] == [b"first"]


def test_unknown_compression_name() -> None:
    with pytest.raises(ValueError, match="unknown compression 'brotli'"):
        RecordBatchBuilder("brotli")


# --- pinned bytes --------------------------------------------------------------


def _pinned_batch() -> bytes:
    builder = RecordBatchBuilder(
        "none", producer_id=7, producer_generation=1, base_sequence=0, transactional=True
    )
    builder.append(b"hello", key=b"k1", timestamp_ms=1_700_000_000_000)
    builder.append(None, key=None, headers=[("h", b"v")], timestamp_ms=1_700_000_000_005)
    return builder.build()


def test_pinned_uncompressed_batch_bytes() -> None:
    # The worked example of docs/formats.md; if this changes, the format changed.
    batch = _pinned_batch()
    assert batch.hex() == (
        "0000000000000000"  # base_offset 0
        "0000004a"  # batch_length 74
        "ffffffff"  # partition_leader_epoch -1: not stamped by a log yet
        "02"  # magic
        "c619fc70"  # crc
        "0010"  # attributes: transactional, codec none
        "00000001"  # last_offset_delta
        "0000018bcfe56800"  # first_timestamp_ms
        "0000018bcfe56805"  # max_timestamp_ms
        "0000000000000007"  # producer_id
        "0001"  # producer_generation (Kafka's producerEpoch, int16)
        "00000000"  # base_sequence
        "00000002"  # record_count
        # record 0: length 13 (zig-zag 1a), attributes, ts delta 0, offset delta 0,
        # key length 2 (04) "k1", value length 5 (0a) "hello", 0 headers
        "1a"
        "00"
        "00"
        "00"
        "04"
        "6b31"
        "0a"
        "68656c6c6f"
        "00"
        # record 1: length 10 (14), attributes, ts delta 5 (0a), offset delta 1 (02),
        # null key (01), null value (01), 1 header (02): key "h" (02 68), value "v" (02 76)
        "14"
        "00"
        "0a"
        "02"
        "01"
        "01"
        "02"
        "0268"
        "0276"
    )
    assert crc32c(batch[ATTRIBUTES_OFFSET:]) == 0xC619FC70


def test_pinned_plain_batch_with_null_keys_and_no_headers() -> None:
    # Assembled by hand from the grammar in engine/records/batch_format.py, not by the builder:
    # a non-transactional batch, null keys, no headers, a 5-byte and an empty value.
    records = bytes.fromhex(
        # record 0: length 11 (zig-zag 16), attributes 0, ts delta 0, offset delta 0,
        # null key (01), value length 5 (0a) "hello", 0 headers
        "16 00 00 00 01 0a 68656c6c6f 00"
        # record 1: length 6 (0c), attributes 0, ts delta 7 (0e), offset delta 1 (02),
        # null key (01), value length 0 (00: empty, not null), 0 headers
        " 0c 00 0e 02 01 00 00"
    )
    after_crc = (
        struct.pack(
            ">hiqqqhii",
            0,  # attributes: codec none, create time, not transactional
            1,  # last_offset_delta
            1_700_000_000_000,  # first_timestamp_ms
            1_700_000_000_007,  # max_timestamp_ms
            -1,  # producer_id: none
            -1,  # producer_generation: none
            -1,  # base_sequence: none
            2,  # record_count
        )
        + records
    )
    crc = crc32c(after_crc)
    assert crc == 0xC10EBD68  # pinned: if this changes, the format (or CRC-32C) changed
    # partition_leader_epoch -1: a producer writes none; the log stamps its own on append
    expected = struct.pack(">qiibI", 0, 4 + 1 + 4 + len(after_crc), -1, 2, crc) + after_crc
    assert len(expected) == 80

    builder = RecordBatchBuilder("none")
    builder.append(b"hello", key=None, timestamp_ms=1_700_000_000_000)
    builder.append(b"", key=None, timestamp_ms=1_700_000_000_007)
    batch = builder.build()
    assert batch.hex() == expected.hex()
    header = validate_batch(batch)
    assert (header.crc, header.is_transactional, header.record_count) == (crc, False, 2)
    assert header.partition_leader_epoch == NO_PARTITION_LEADER_EPOCH
    records_read = list(RecordBatch(batch).records())
    assert [(r.key, r.value, r.headers) for r in records_read] == [
        (None, b"hello", ()),
        (None, b"", ()),
    ]


# --- the header's one packer and one parser ------------------------------------

i64 = st.integers(-(1 << 63), (1 << 63) - 1)
i32 = st.integers(-(1 << 31), (1 << 31) - 1)


@given(
    fields=st.tuples(
        i64,
        st.integers(-(1 << 15), (1 << 15) - 1),
        i32,
        i64,
        i64,
        i64,
        st.integers(-1, (1 << 15) - 1),
        i32,
    ),
    partition_leader_epoch=i32,
    record_count=i32,
    records=st.binary(max_size=40),
)
def test_pack_header_and_unpack_header_round_trip(
    fields: tuple[int, ...], partition_leader_epoch: int, record_count: int, records: bytes
) -> None:
    names = BatchHeader._fields
    keywords = dict(zip(names[:1] + names[5:12], fields, strict=True))
    buffer = bytearray(HEADER_BYTES) + records
    pack_header(
        buffer,
        **keywords,
        record_count=record_count,
        partition_leader_epoch=partition_leader_epoch,
    )
    header = unpack_header(bytes(buffer))
    assert header._asdict() == {
        **keywords,
        "partition_leader_epoch": partition_leader_epoch,
        "batch_length": len(buffer) - 12,
        "magic": 2,
        "crc": crc32c(bytes(buffer[ATTRIBUTES_OFFSET:])),
        "record_count": record_count,
    }
    assert unpack_header(b"xyz" + buffer, 3) == header


def test_unpack_header_needs_the_whole_header() -> None:
    batch = build_batch([b"x"], "none")
    with pytest.raises(CorruptBatchError, match="needs 61 bytes, found 60"):
        unpack_header(batch[: HEADER_BYTES - 1])
    with pytest.raises(CorruptBatchError, match="needs 61 bytes, found 60"):
        unpack_header(batch[:HEADER_BYTES], 1)


def test_only_batch_format_packs_or_parses_the_header() -> None:
    # One packer, one parser: any other module reads the header through them, so the
    # layout is written down once (a module may read just the 12-byte length prefix).
    package = Path(ROOT)
    others = [
        path.relative_to(package).as_posix()
        for path in package.rglob("*.py")
        if path.relative_to(package).parts[0] not in ("tests", "bench", ".venv")
        and path.name != "batch_format.py"
        and re.search(r"\b_?HEADER\b|>qibIhiqqqiiqi", path.read_text())
    ]
    assert others == []


# --- bad bytes -----------------------------------------------------------------


def _flip(data: bytes, position: int, bit: int = 0) -> bytes:
    mutable = bytearray(data)
    mutable[position] ^= 1 << bit
    return bytes(mutable)


@pytest.mark.parametrize("compression", list(CODEC_BY_NAME))
def test_every_single_bit_flip_after_length_is_caught(compression: str) -> None:
    batch = build_batch([b"a" * 50, b"b" * 20], compression)
    for position in range(MAGIC_OFFSET, len(batch)):
        with pytest.raises(CorruptBatchError):
            RecordBatch(_flip(batch, position, position % 8))


def test_crc_mismatch_names_both_values() -> None:
    batch = build_batch([b"x"], "none")
    with pytest.raises(
        CorruptBatchError, match=r"header says 0x[0-9a-f]{8}, bytes give 0x[0-9a-f]{8}"
    ):
        validate_batch(_flip(batch, len(batch) - 1))


def test_torn_batch_names_lengths() -> None:
    batch = build_batch([b"x" * 100], "none")
    for cut in range(len(batch)):
        with pytest.raises(CorruptBatchError):
            RecordBatch(batch[:cut])
    with pytest.raises(CorruptBatchError, match=rf"says {len(batch)} bytes, only 100 present"):
        read_header(batch[:100])


def test_bad_length_field() -> None:
    batch = bytearray(build_batch([b"x"], "none"))
    struct.pack_into(">i", batch, 8, -5)
    with pytest.raises(CorruptBatchError, match="batch length field is -5"):
        read_header(bytes(batch))


def test_unknown_codec_and_magic() -> None:
    batch = bytearray(build_batch([b"x"], "none"))
    batch[MAGIC_OFFSET] = 1
    with pytest.raises(CorruptBatchError, match="magic byte is 1, expected 2"):
        read_header(bytes(batch))
    batch = bytearray(build_batch([b"x"], "none"))
    struct.pack_into(">h", batch, ATTRIBUTES_OFFSET, 5)  # no Kafka codec has id 5
    with pytest.raises(CorruptBatchError, match="codec 5"):
        read_header(bytes(batch))


def _rehash(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, CRC_OFFSET, crc32c(bytes(batch[ATTRIBUTES_OFFSET:])))
    return bytes(batch)


def _with_counts(record_count: int, last_offset_delta: int) -> bytes:
    """A one-record batch claiming other counts, CRC made valid again."""
    batch = bytearray(build_batch([b"x"], "none"))
    struct.pack_into(">i", batch, ATTRIBUTES_OFFSET + 2, last_offset_delta)
    struct.pack_into(">i", batch, HEADER_BYTES - 4, record_count)
    return _rehash(batch)


@pytest.mark.parametrize(
    ("record_count", "last_offset_delta"),
    [(1, (1 << 31) - 1), (0, 0), (0, 5), (2, 4)],
    ids=["one-record-moving-2**31", "zero-records", "zero-records-delta-5", "fewer-than-delta"],
)
def test_producer_batches_need_one_record_per_offset(
    record_count: int, last_offset_delta: int
) -> None:
    batch = _with_counts(record_count, last_offset_delta)
    header = validate_batch(
        batch
    )  # the format allows it: compaction keeps offsets of dropped records
    with pytest.raises(CorruptBatchError) as caught:
        check_producer_batch(header)
    assert f"{record_count} records with last offset delta {last_offset_delta}" in str(caught.value)
    check_producer_batch(validate_batch(build_batch([b"a", b"b", b"c"], "zstd")))


def test_the_broker_refuses_a_batch_claiming_more_offsets_than_records(tmp_path: Path) -> None:
    with Broker.open(tmp_path) as broker:
        broker.create_topic("t")
        broker.produce("t", 0, build_batch([b"good"], "none"))
        for record_count, last_offset_delta in [(1, (1 << 31) - 1), (0, 0)]:
            with pytest.raises(CorruptBatchError, match=f"{record_count} records with last offset"):
                broker.produce("t", 0, _with_counts(record_count, last_offset_delta))
        assert broker.list_offset("t", 0, "latest") == 1  # the log end did not move


def test_bad_records_section_with_good_crc_is_typed() -> None:
    # A producer bug (not line noise): the CRC matches but the records do not parse.
    batch = bytearray(build_batch([b"hello"], "none"))
    batch[HEADER_BYTES] = 0x7F  # record length varint far too large
    with pytest.raises(CorruptBatchError, match="record 0 says"):
        list(RecordBatch(_rehash(batch)).records())


def test_garbage_zstd_section_is_typed() -> None:
    batch = bytearray(build_batch([b"hello" * 20], "zstd"))
    batch[HEADER_BYTES:] = b"\x00" * (len(batch) - HEADER_BYTES)
    with pytest.raises(CorruptBatchError, match="zstd"):
        list(RecordBatch(_rehash(batch)).records())


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_never_raise_untyped_errors(data: bytes) -> None:
    try:
        batch = RecordBatch(data)
        list(batch.records())
    except CorruptBatchError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_records_section_garbage_with_valid_crc_is_typed(data: st.DataObject) -> None:
    compression = data.draw(st.sampled_from(list(CODEC_BY_NAME)))
    batch = bytearray(build_batch([b"abc", None, b"defgh"], compression))
    garbage = data.draw(st.binary(min_size=0, max_size=60))
    batch[HEADER_BYTES:] = garbage
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    try:
        list(RecordBatch(_rehash(batch)).records())
    except CorruptBatchError:
        pass


def test_iter_batches_walks_consecutive_batches() -> None:
    first = build_batch([b"1", b"2"], "zstd")
    second = b"".join(bytes(p) for p in with_log_position(build_batch([b"3"], "none"), 2, 0))
    values = [r.value for b in iter_batches(first + second) for r in b.records()]
    assert values == [b"1", b"2", b"3"]
    assert [
        b.header.base_offset for b in iter_batches(first + second[:-3], allow_partial_tail=True)
    ] == [0]
    with pytest.raises(CorruptBatchError):
        list(iter_batches(first + second[:-3]))


def test_a_header_over_records_in_pieces_is_the_header_over_them_joined() -> None:
    records = [b"a" * 100, memoryview(b"b" * 5000), b"", b"c"]
    fields = dict(
        base_offset=0,
        attributes=CODEC_NONE,
        last_offset_delta=0,
        first_timestamp_ms=5,
        max_timestamp_ms=9,
        producer_id=-1,
        producer_generation=-1,
        base_sequence=-1,
        record_count=1,
    )
    joined = b"".join(records)
    assert encode_header(records, **fields) == encode_header(joined, **fields)


def test_iter_batches_of_crc_checked_bytes_reads_headers_only() -> None:
    batch = bytearray(build_batch([b"1", b"2"], "none"))
    batch[CRC_OFFSET] ^= 1  # a CRC the reader would refuse: here, it is not checked again
    values = [r.value for b in iter_batches(bytes(batch), crc_checked=True) for r in b.records()]
    assert values == [b"1", b"2"]
    with pytest.raises(CorruptBatchError, match="CRC"):
        list(iter_batches(bytes(batch)))
    with pytest.raises(CorruptBatchError, match="only 20 present"):
        list(iter_batches(bytes(batch[:20]), crc_checked=True))  # the header still is
