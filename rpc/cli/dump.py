"""``twinlog dump FILE...``: a data log file's contents, as kafka-dump-log.sh prints Kafka's.

A segment (``.log``, or the ``.corrupt`` bytes recovery cut from one) prints one line
per batch; ``--print-records`` adds one per record, ``--print-payload`` their keys,
values and headers. Index files (``.index``, ``.timeindex``) print their entries.
It reads the file only (no broker, no lock): dumping a live segment shows what was
written so far. Batches are checked and decoded by the engine's own code
(``batch_format``, ``batch_reader``, ``record_decoder``), so dump accepts and refuses
exactly what a broker does.

A damaged batch prints its position and the error. A bad CRC spoils only its own
batch (its length is still trusted, and the walk goes on, as kafka-dump-log.sh's
``isvalid: false``); a damaged length or header ends the walk, since the next
batch cannot be found. The exit status is then 1.
"""

from __future__ import annotations

import argparse
import mmap
import re
import sys
from pathlib import Path
from typing import Any

from twinlog.engine.base.errors import CorruptBatchError
from twinlog.engine.base.wording import counted
from twinlog.engine.log.files import INDEX_SUFFIX, TIME_INDEX_SUFFIX
from twinlog.engine.log.segment_index import (
    OFFSET_ENTRY,
    OFFSET_ENTRY_BYTES,
    TIME_ENTRY,
    TIME_ENTRY_BYTES,
)
from twinlog.engine.records.batch_format import (
    CONTROL_MASK,
    NO_SEQUENCE,
    BatchHeader,
    compute_crc,
    read_header,
    validate_batch,
)
from twinlog.engine.records.batch_reader import RecordBatch
from twinlog.engine.records.compression import CODEC_NAMES
from twinlog.rpc.cli.arguments import UsageError
from twinlog.rpc.cli.common import add_command
from twinlog.rpc.client.record_encoding import ENCODINGS, encode_bytes

EXAMPLE = """
twinlog dump data/orders-0/00000000000000000000.log
twinlog dump data/orders-0/00000000000000000000.log --print-records --print-payload
twinlog dump data/orders-0/00000000000000000000.index
"""

_BASE_OFFSET_NAME = re.compile(r"^(\d{20})\.")


def register(subparsers: Any) -> None:
    parser = add_command(
        subparsers,
        "dump",
        "print the batches and records of a segment file (as kafka-dump-log.sh)",
        EXAMPLE,
        [],
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help=".log, .index or .timeindex")
    parser.add_argument(
        "--print-records",
        "--deep-iteration",
        action="store_true",
        help="print each record: offset, timestamp, key and value sizes, header keys",
    )
    parser.add_argument(
        "--print-payload",
        "--print-data-log",
        action="store_true",
        help="print each record's key, value and headers too (implies --print-records)",
    )
    parser.add_argument(
        "--deep",
        action="store_true",
        help="decode every batch's records to check them, even without --print-records",
    )
    parser.add_argument(
        "--encoding",
        choices=ENCODINGS,
        default="text",
        help="payload: text (escaped UTF-8, default) or base64",
    )
    parser.set_defaults(run=run)


def _lower(flag: bool) -> str:
    return "true" if flag else "false"


def batch_line(header: BatchHeader, position: int, crc_valid: bool, actual_crc: int) -> str:
    last_sequence = header.last_sequence
    validity = "true" if crc_valid else f"false (the bytes give 0x{actual_crc:08x})"
    return (
        f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} "
        f"count: {header.record_count} baseSequence: {header.base_sequence} "
        f"lastSequence: {last_sequence if last_sequence != NO_SEQUENCE else -1} "
        f"producerId: {header.producer_id} producerGeneration: {header.producer_generation} "
        f"partitionLeaderEpoch: {header.partition_leader_epoch} "
        f"isTransactional: {_lower(header.is_transactional)} "
        f"isControl: {_lower(bool(header.attributes & CONTROL_MASK))} "
        f"position: {position} CreateTime: {header.max_timestamp_ms} "
        f"size: {header.size_bytes} magic: {header.magic} "
        f"compresscodec: {CODEC_NAMES.get(header.codec, header.codec)} "
        f"crc: 0x{header.crc:08x} isvalid: {validity}"
    )


class Dumper:
    def __init__(self, args: argparse.Namespace) -> None:
        self.print_records = args.print_records or args.print_payload
        self.print_payload = args.print_payload
        self.deep = args.deep
        self.encoding = args.encoding
        self.batches = 0
        self.records = 0
        self.damaged: list[int] = []  # positions

    def _text(self, data: bytes | None) -> str:
        text = encode_bytes(data, self.encoding, escape_controls=True)
        return "null" if text is None else text

    def damage(self, position: int, error: Exception) -> None:
        self.damaged.append(position)
        print(f"position: {position} damaged: {type(error).__name__}: {error}")

    def records_of(self, buffer: Any, position: int) -> None:
        try:
            records = list(RecordBatch(buffer, position).records())
        except CorruptBatchError as error:
            self.damage(position, error)
            return
        self.records += len(records)
        if not self.print_records:
            return
        for record in records:
            line = (
                f"| offset: {record.offset} CreateTime: {record.timestamp_ms} "
                f"keySize: {-1 if record.key is None else len(record.key)} "
                f"valueSize: {-1 if record.value is None else len(record.value)} "
                f"headerKeys: [{','.join(key for key, _ in record.headers)}]"
            )
            if self.print_payload:
                headers = ",".join(
                    f"{self._text(key.encode())}:{self._text(value)}"
                    for key, value in record.headers
                )
                line += (
                    f" key: {self._text(record.key)} payload: {self._text(record.value)}"
                    f" headers: [{headers}]"
                )
            print(line)

    def segment(self, buffer: Any) -> None:
        position = 0
        while position < len(buffer):
            try:
                header = read_header(buffer, position)
            except CorruptBatchError as error:
                self.damage(position, error)
                print(f"the walk stops at position {position}: the next batch cannot be found")
                return
            actual_crc = compute_crc(buffer, position, header.batch_length)
            crc_valid = actual_crc == header.crc
            self.batches += 1
            print(batch_line(header, position, crc_valid, actual_crc))
            if not crc_valid:
                try:
                    validate_batch(buffer, position)  # for the engine's own message
                except CorruptBatchError as error:
                    self.damage(position, error)
            elif self.print_records or self.deep:
                self.records_of(buffer, position)
            position += header.size_bytes

    def index(self, data: bytes, base_offset: int, time_index: bool) -> None:
        entry = TIME_ENTRY if time_index else OFFSET_ENTRY
        entry_bytes = TIME_ENTRY_BYTES if time_index else OFFSET_ENTRY_BYTES
        whole = len(data) - len(data) % entry_bytes
        for fields in entry.iter_unpack(data[:whole]):
            if time_index:
                timestamp_ms, relative_offset = fields
                print(f"timestamp: {timestamp_ms} offset: {base_offset + relative_offset}")
            else:
                relative_offset, file_position = fields
                print(f"offset: {base_offset + relative_offset} position: {file_position}")
        if whole != len(data):
            self.damage(
                whole,
                ValueError(
                    f"{len(data) - whole} bytes after the last whole {entry_bytes}-byte entry"
                ),
            )


def _dump_file(dumper: Dumper, path: Path) -> None:
    print(f"Dumping {path}")
    found = _BASE_OFFSET_NAME.match(path.name)
    base_offset = int(found.group(1)) if found else 0
    if found:
        print(f"Starting offset: {base_offset}")
    try:
        with path.open("rb") as file:
            if path.name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX)):
                dumper.index(file.read(), base_offset, path.name.endswith(TIME_INDEX_SUFFIX))
                return
            size = path.stat().st_size
            if size == 0:
                return
            with mmap.mmap(file.fileno(), size, access=mmap.ACCESS_READ) as mapped:
                view = memoryview(mapped)
                try:
                    dumper.segment(view)
                finally:
                    view.release()
    except OSError as error:
        raise UsageError(f"cannot read {path}: {error.strerror}") from None


def run(args: argparse.Namespace) -> int:
    dumper = Dumper(args)
    for name in args.files:
        _dump_file(dumper, Path(name))
    summary = counted(dumper.batches, "batch", "batches")
    if dumper.print_records or dumper.deep:
        summary += f", {counted(dumper.records, 'record')}"
    if dumper.damaged:
        print(
            f"error: {len(dumper.damaged)} damaged (first at position {dumper.damaged[0]}); "
            f"{summary} read",
            file=sys.stderr,
        )
        return 1
    print(summary, file=sys.stderr)
    return 0
