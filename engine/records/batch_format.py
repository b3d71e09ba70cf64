"""The record batch: twinlog's unit of storage and transfer.

The shape is Kafka's RecordBatch v2, byte for byte (61 header bytes), so Kafka's
own readers decode twinlog's segment files. All integers are big-endian.
``docs/formats.md`` has a worked example.

    RecordBatch =>
      base_offset          int64   offset of the first record; written by the log on append
      batch_length         int32   bytes that follow this field
      partition_leader_epoch int32 leader epoch of the log that appended it; written by the
                                   log on append; -1 (NO_PARTITION_LEADER_EPOCH) until then
      magic                int8    format version, 2
      crc                  uint32  CRC-32C of every byte from attributes to the end
      attributes           int16   bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd),
                                   bit 3 timestamp type,
                                   bit 4 transactional, bit 5 control (never written), rest 0
      last_offset_delta    int32   offset of the last record minus base_offset
      first_timestamp_ms   int64   timestamp of the first record
      max_timestamp_ms     int64   largest timestamp in the batch
      producer_id          int64   -1 when the producer is not idempotent
      producer_generation  int16   the producer id's generation: Kafka's producerEpoch,
                                   0..32767, -1 if none
      base_sequence        int32   sequence of the first record, -1 if none
      record_count         int32   number of records
      records              bytes   record_count Records, compressed as a whole by the codec

    Record =>
      length               varint  bytes that follow
      attributes           int8    unused, 0
      timestamp_delta      varlong timestamp minus first_timestamp_ms
      offset_delta         varint  offset minus base_offset
      key_length           varint  -1 for a null key
      key                  bytes
      value_length         varint  -1 for a null value
      value                bytes
      header_count         varint
      headers              Header*

    Header =>
      key_length varint, key bytes (UTF-8), value_length varint (-1 null), value bytes

base_offset, batch_length and partition_leader_epoch lie outside the CRC, so the
log assigns offsets and stamps its leader epoch by patching bytes, without
re-hashing (``with_log_position``); the magic byte is outside it too, as in Kafka,
so a reader can tell the version before it knows how to check.

The transaction a transactional batch belongs to is not in the batch (Kafka has
no such field): it travels beside the batch, in the produce request, and the
local data journal keeps it in its entry header.

The layout before this one (67 bytes: no partition leader epoch, a 32-bit
generation and an int64 transaction id after base_sequence) put its magic byte at
position 12; ``looks_like_old_layout`` recognises it so that old data is refused,
never taken for a torn tail and truncated.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from twinlog.engine.base.crc32c import crc32c
from twinlog.engine.base.errors import CorruptBatchError, InvalidProducerGenerationError
from twinlog.engine.records.compression import CODEC_MASK, CODEC_NAMES

MAGIC = 2

# Packed by ``pack_header`` and parsed by ``unpack_header`` only: every other module goes
# through those two, so the byte layout is written down once.
_HEADER = struct.Struct(
    ">"
    "q"  # base_offset
    "i"  # batch_length
    "i"  # partition_leader_epoch
    "b"  # magic
    "I"  # crc
    "h"  # attributes
    "i"  # last_offset_delta
    "q"  # first_timestamp_ms
    "q"  # max_timestamp_ms
    "q"  # producer_id
    "h"  # producer_generation
    "i"  # base_sequence
    "i"  # record_count
)
HEADER_BYTES = _HEADER.size
BASE_OFFSET_FORMAT = struct.Struct(">q")
CRC_FORMAT = struct.Struct(">I")
LENGTH_PREFIX = struct.Struct(">qi")  # base_offset, batch_length: enough to find the next batch
LENGTH_PREFIX_BYTES = LENGTH_PREFIX.size  # batch_length counts the bytes after these
LOG_POSITION = struct.Struct(">qii")  # base_offset, batch_length, partition_leader_epoch
PARTITION_LEADER_EPOCH_FORMAT = struct.Struct(">i")
PARTITION_LEADER_EPOCH_OFFSET = LENGTH_PREFIX_BYTES
MAGIC_OFFSET = struct.calcsize(">qii")
CRC_OFFSET = struct.calcsize(">qiib")
ATTRIBUTES_OFFSET = struct.calcsize(">qiibI")  # the CRC covers [ATTRIBUTES_OFFSET, end)
RECORDS_OFFSET = HEADER_BYTES
BATCH_LENGTH_MIN = HEADER_BYTES - LENGTH_PREFIX_BYTES
assert HEADER_BYTES == 61 and MAGIC_OFFSET == 16 and CRC_OFFSET == 17 and ATTRIBUTES_OFFSET == 21

# Where the 67-byte layout of older twinlog versions had its magic byte (right after the
# length), and the CRC that followed it: enough to recognise such a batch for certain.
OLD_LAYOUT_MAGIC_OFFSET = LENGTH_PREFIX_BYTES
OLD_LAYOUT_CRC_OFFSET = OLD_LAYOUT_MAGIC_OFFSET + 1
OLD_LAYOUT_ATTRIBUTES_OFFSET = OLD_LAYOUT_CRC_OFFSET + 4
OLD_LAYOUT_HEADER_BYTES = 67

TIMESTAMP_TYPE_MASK = 0x08  # 0 = create time (the producer's), 1 = log append time
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
KNOWN_ATTRIBUTE_BITS = CODEC_MASK | TIMESTAMP_TYPE_MASK | TRANSACTIONAL_MASK | CONTROL_MASK

NO_PRODUCER_ID = -1
NO_PRODUCER_GENERATION = -1
# Kafka's producerEpoch is an int16; Kafka gives a producer id a new id once its epoch
# would pass Short.MAX_VALUE - 1 (KIP-360/KIP-890), so the largest one in use is 32766 and
# 32767 stays free for the bump that ends it.
PRODUCER_GENERATION_MAX = 0x7FFF
NO_SEQUENCE = -1
# Not a header field any more: the value the produce path uses for "no transaction given".
NO_TRANSACTION_ID = -1
NO_TIMESTAMP = -1
# What a producer writes (as Kafka's clients do) and what a log has not stamped yet.
NO_PARTITION_LEADER_EPOCH = -1

# A batch larger than this is refused before anything is allocated for it,
# whatever its length field claims. Per-topic limits are smaller (config).
BATCH_BYTES_HARD_MAX = 1 << 30


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    first_timestamp_ms: int
    max_timestamp_ms: int
    producer_id: int
    producer_generation: int
    base_sequence: int
    record_count: int

    @property
    def size_bytes(self) -> int:
        """Bytes of the whole batch, header included."""
        return LENGTH_PREFIX_BYTES + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        """Offset the next batch in a log will get."""
        return self.base_offset + self.last_offset_delta + 1

    @property
    def codec(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record, or NO_SEQUENCE."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return self.base_sequence + self.last_offset_delta


def encode_header(
    records_section: bytes | list[bytes | memoryview],
    *,
    base_offset: int,
    attributes: int,
    last_offset_delta: int,
    first_timestamp_ms: int,
    max_timestamp_ms: int,
    producer_id: int,
    producer_generation: int,
    base_sequence: int,
    record_count: int,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytearray:
    """The ``HEADER_BYTES`` of a batch whose (compressed) records section is
    ``records_section``: the given fields, the magic byte, the batch length and the CRC
    of everything from the attributes on. The one writer of the header's bytes (the
    records are not copied: the CRC runs over the header's part, then over them).
    ``records_section`` may be a list of pieces, written after the header in that order
    (the journal's ENTRY: the producer's batch is one of them, never joined).
    Raises InvalidProducerGenerationError for a generation int16 cannot hold.
    """
    check_producer_generation(producer_generation)
    pieces = records_section if isinstance(records_section, list) else (records_section,)
    header = bytearray(HEADER_BYTES)
    _HEADER.pack_into(
        header,
        0,
        base_offset,
        HEADER_BYTES + sum(len(piece) for piece in pieces) - LENGTH_PREFIX_BYTES,
        partition_leader_epoch,
        MAGIC,
        0,  # crc: it covers the attributes packed here, so it is computed after them
        attributes,
        last_offset_delta,
        first_timestamp_ms,
        max_timestamp_ms,
        producer_id,
        producer_generation,
        base_sequence,
        record_count,
    )
    crc = crc32c(bytes(header[ATTRIBUTES_OFFSET:]))
    for piece in pieces:
        crc = crc32c(piece, crc)
    CRC_FORMAT.pack_into(header, CRC_OFFSET, crc)
    return header


def pack_header(buffer: bytearray, **fields: int) -> None:
    """Write the header of the batch that ``buffer`` holds, its records already in place:
    ``buffer[RECORDS_OFFSET:]`` is the (compressed) records section, and its first
    ``HEADER_BYTES`` become ``encode_header``'s for ``fields`` (its keyword arguments)."""
    buffer[:HEADER_BYTES] = encode_header(bytes(memoryview(buffer)[RECORDS_OFFSET:]), **fields)


def unpack_header(buffer: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
    """The header fields at ``position``, as they are: nothing is checked but their presence.

    The one parser of the header's bytes. ``read_header`` checks what it returns;
    call this directly only where the fields are checked otherwise (a header walk
    that checks length and magic, or a guess at what a damaged batch claimed).
    Raises CorruptBatchError if fewer than ``HEADER_BYTES`` bytes are there.
    """
    if len(buffer) - position < HEADER_BYTES:
        raise CorruptBatchError(
            f"batch header needs {HEADER_BYTES} bytes, found {len(buffer) - position}", position
        )
    return BatchHeader._make(_HEADER.unpack_from(buffer, position))


def read_length_prefix(buffer: bytes | memoryview, position: int = 0) -> tuple[int, int]:
    """(base_offset, batch_length) of the batch at ``position``; raises if fewer than 12 bytes."""
    if len(buffer) - position < LENGTH_PREFIX_BYTES:
        raise CorruptBatchError(
            f"batch header needs {LENGTH_PREFIX_BYTES} bytes for offset and length, "
            f"found {len(buffer) - position}",
            position,
        )
    base_offset, batch_length = LENGTH_PREFIX.unpack_from(buffer, position)
    if not BATCH_LENGTH_MIN <= batch_length <= BATCH_BYTES_HARD_MAX:
        raise CorruptBatchError(
            f"batch length field is {batch_length}, expected {BATCH_LENGTH_MIN}.."
            f"{BATCH_BYTES_HARD_MAX}",
            position,
        )
    return base_offset, batch_length


def read_header(buffer: bytes | memoryview, position: int = 0) -> BatchHeader:
    """Parse (without checking the CRC) the header of the batch at ``position``.

    Checks what can be checked without reading the records: the length field is
    sane and the buffer holds the whole batch, the magic byte, the codec and the
    count/delta relation. Raises CorruptBatchError naming the field.
    """
    _, batch_length = read_length_prefix(buffer, position)
    available = len(buffer) - position
    if available < LENGTH_PREFIX_BYTES + batch_length:
        raise CorruptBatchError(
            f"batch length field says {LENGTH_PREFIX_BYTES + batch_length} bytes, "
            f"only {available} present (torn or truncated batch)",
            position,
        )
    return check_header(unpack_header(buffer, position), position)


def check_header(header: BatchHeader, position: int = 0) -> BatchHeader:
    """``read_header``'s checks of the fields themselves (magic byte, codec, attribute
    bits, count/delta); ``position`` names the batch in errors. For a batch held as
    pieces, whose length its caller checks against the pieces'."""
    if header.magic != MAGIC:
        raise CorruptBatchError(f"batch magic byte is {header.magic}, expected {MAGIC}", position)
    if header.codec not in CODEC_NAMES:
        raise CorruptBatchError(
            f"batch attributes name codec {header.codec}, expected one of "
            f"{sorted(CODEC_NAMES)} ({', '.join(CODEC_NAMES.values())})",
            position,
        )
    if header.attributes & ~KNOWN_ATTRIBUTE_BITS & 0xFFFF:
        raise CorruptBatchError(
            f"batch attributes 0x{header.attributes & 0xFFFF:04x} set unknown bits", position
        )
    if (
        header.record_count < 0
        or header.last_offset_delta < 0
        or (header.record_count > header.last_offset_delta + 1)
    ):
        raise CorruptBatchError(
            f"batch says {header.record_count} records with last offset delta "
            f"{header.last_offset_delta}; expected count >= 0 and count <= delta + 1",
            position,
        )
    return header


def compute_crc(buffer: bytes | memoryview, position: int, batch_length: int) -> int:
    end = position + LENGTH_PREFIX_BYTES + batch_length
    view = buffer if isinstance(buffer, memoryview) else memoryview(buffer)
    return crc32c(view[position + ATTRIBUTES_OFFSET : end])


def validate_batch(buffer: bytes | memoryview, position: int = 0) -> BatchHeader:
    """Parse the header and check the CRC of the batch at ``position``.

    Returns its header; raises CorruptBatchError (naming expected and found
    values) for any malformed byte. The records section is not decompressed.
    """
    header = read_header(buffer, position)
    actual = compute_crc(buffer, position, header.batch_length)
    if actual != header.crc:
        raise CorruptBatchError(
            f"batch CRC-32C mismatch: header says 0x{header.crc:08x}, bytes give 0x{actual:08x}",
            position,
        )
    return header


def check_producer_batch(header: BatchHeader) -> None:
    """Refuse a producer's batch whose record count is not ``last_offset_delta + 1`` (>= 1).

    ``read_header`` allows fewer records than offsets, because log compaction
    keeps a batch's offsets when it drops records from it. A producer has no
    such reason: every record it sends gets the next offset. Without this check
    one record with a last offset delta of 2**31 - 1 would move the log end by
    two billion offsets. Call it on batches arriving from producers only.
    """
    if header.record_count < 1 or header.record_count != header.last_offset_delta + 1:
        raise CorruptBatchError(
            f"batch says {header.record_count} records with last offset delta "
            f"{header.last_offset_delta}; a producer's batch must hold at least one record and "
            f"exactly last offset delta + 1 (= {header.last_offset_delta + 1}) records: "
            "rebuild it with a record batch builder"
        )


def check_producer_generation(producer_generation: int) -> None:
    """Refuse a generation the header's int16 cannot hold (NO_PRODUCER_GENERATION is fine).

    Requests carry the generation in wider integers; one outside 0..32767 was never given
    by init_producer, and would not survive the trip through a batch header unchanged.
    """
    if producer_generation != NO_PRODUCER_GENERATION and not (
        0 <= producer_generation <= PRODUCER_GENERATION_MAX
    ):
        raise InvalidProducerGenerationError(
            f"producer generation {producer_generation} is outside 0..{PRODUCER_GENERATION_MAX} "
            "(Kafka's 16-bit producer epoch); send the generation init_producer() returned"
        )


def with_log_position(
    batch: bytes | memoryview, base_offset: int, partition_leader_epoch: int
) -> list[bytes | memoryview]:
    """The batch with its base offset and partition leader epoch replaced, as pieces for
    ``os.writev``.

    Only the 16-byte prefix is new; the rest is the caller's bytes, not copied. The CRC
    stays valid: both fields (and the length between them, kept) are outside it.
    """
    view = batch if isinstance(batch, memoryview) else memoryview(batch)
    _, batch_length = LENGTH_PREFIX.unpack_from(view)
    prefix = LOG_POSITION.pack(base_offset, batch_length, partition_leader_epoch)
    return [prefix, view[LOG_POSITION.size :]]


def looks_like_old_layout(buffer: bytes | memoryview, position: int = 0) -> bool:
    """Is the batch at ``position`` one of the 67-byte layout older twinlog versions wrote?

    Its magic byte (2) sits at position 12, where this layout has the high byte of the
    partition leader epoch; so the old CRC (at 13, over [17, end)) must also hold, which
    no batch of this layout matches by chance. Used to refuse old data, not to read it.
    """
    view = buffer if isinstance(buffer, memoryview) else memoryview(buffer)
    if len(view) - position < OLD_LAYOUT_HEADER_BYTES:
        return False
    _, batch_length = LENGTH_PREFIX.unpack_from(view, position)
    end = position + LENGTH_PREFIX_BYTES + batch_length
    if view[position + OLD_LAYOUT_MAGIC_OFFSET] != MAGIC or not (
        OLD_LAYOUT_HEADER_BYTES <= LENGTH_PREFIX_BYTES + batch_length and end <= len(view)
    ):
        return False
    (old_crc,) = CRC_FORMAT.unpack_from(view, position + OLD_LAYOUT_CRC_OFFSET)
    return bool(crc32c(view[position + OLD_LAYOUT_ATTRIBUTES_OFFSET : end]) == old_crc)
