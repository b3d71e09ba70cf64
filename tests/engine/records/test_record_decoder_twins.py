"""The record decoder's two twins on the same bytes: the compiled ``decode_into`` decodes
exactly what the Python reference decodes and refuses exactly what it refuses (handing the
section back untouched, so that the reference words the one message), and its
``check_records`` (the door's check, keeping nothing) accepts and refuses the same; ``decode_records``
answers as the reference does with either in use; ``TWINLOG_NO_EXTENSIONS`` forces the
reference; and an install without a C compiler still succeeds, with the reference."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from checkout import copy_of_checkout
from hypothesis import given, settings
from hypothesis import strategies as st
from record_sections import DAMAGED, batch_of, damaged_sections, header_of

from twinlog.engine.base import extensions
from twinlog.engine.base.errors import CorruptBatchError
from twinlog.engine.records import record_decoder
from twinlog.engine.records.batch_builder import encode_record
from twinlog.engine.records.batch_format import BatchHeader, validate_batch
from twinlog.engine.records.record_decoder import (
    RecordColumns,
    check_records,
    check_records_python,
    decode_records,
    decode_records_python,
)
from twinlog.engine.records.varint import encode_varint

COMPILED_NAME = "twinlog.engine.records._record_decoder_c"


def _compiled() -> ModuleType:
    """The compiled twin, whatever the environment says (an install builds it: a test
    environment without it is a broken install, not a reason to skip)."""
    return importlib.import_module(COMPILED_NAME)


def _rows(columns: RecordColumns) -> list[list[Any]]:
    return [
        columns.ends,
        columns.offsets,
        columns.timestamps_ms,
        [None if k is None else (type(k), bytes(k)) for k in columns.keys],
        [None if v is None else (type(v), bytes(v)) for v in columns.values],
        columns.headers,
    ]


def _reference(section: Any, header: BatchHeader, keep_values: bool, views: bool) -> Any:
    """The reference's records (as rows) over one pre-filled row, or its refusal's text."""
    columns = _prefilled()
    try:
        decode_records_python(section, header, columns, keep_values=keep_values, views=views)
    except CorruptBatchError as error:
        return str(error)
    return _rows(columns)


def _prefilled() -> RecordColumns:
    """Columns already holding a row: both twins append, and a refusal must leave it."""
    columns = RecordColumns()
    columns.ends.append(7)
    columns.offsets.append(1)
    columns.timestamps_ms.append(2)
    columns.keys.append(b"held")
    columns.values.append(None)
    columns.headers.append(())
    return columns


def _assert_twins_agree(section: bytes, header: BatchHeader) -> None:
    compiled = _compiled()
    for views in (False, True):
        for keep_values in (False, True):
            given_section: Any = memoryview(section) if views else section
            expected = _reference(given_section, header, keep_values, views)
            columns = _prefilled()
            accepted = compiled.decode_into(
                given_section,
                header.base_offset,
                header.first_timestamp_ms,
                header.last_offset_delta,
                header.record_count,
                columns,
                keep_values,
            )
            checked = compiled.check_records(
                given_section, header.last_offset_delta, header.record_count
            )
            if isinstance(expected, str):  # the reference refused it
                assert checked == -1, (section.hex(), header, expected)
                assert not accepted, (section.hex(), header, expected)
                assert _rows(columns) == _rows(_prefilled())  # handed back untouched
            else:
                assert accepted, (section.hex(), header, expected)
                assert _rows(columns) == expected
                keyed = None not in expected[3][1:]  # past the pre-filled row
                assert checked == (1 if keyed else 0)
                assert check_records(given_section, header) is keyed
                if views:  # views of the caller's buffer, never copies
                    for part in columns.keys[1:] + columns.values[1:]:
                        assert part is None or part.obj is given_section.obj
            # and the one entry point answers as the reference, refusal text included
            try:
                answer: Any = _rows(
                    decode_records(
                        given_section, header, _prefilled(), keep_values=keep_values, views=views
                    )
                )
            except CorruptBatchError as error:
                answer = str(error)
            assert answer == expected


def test_the_installed_decoder_is_the_compiled_one() -> None:
    """CI installs with a C compiler: the compiled twin must be what runs."""
    if extensions.disabled():
        pytest.fail(f"{extensions.NO_EXTENSIONS_ENV} is set: this run checks the build")
    assert record_decoder.COMPILED, extensions.describe()
    assert extensions.describe() == "compiled (record decoder, batch builder)"


def test_pinned_records_decode_alike() -> None:
    section = bytes.fromhex("1a 00 00 00 04 6b31 0a 68656c6c6f 00 14 00 0a 02 01 01 02 0268 0276")
    _assert_twins_agree(section, header_of(2, 1))


@pytest.mark.parametrize(("section", "record_count", "last_offset_delta", "message"), DAMAGED)
def test_damaged_records_refused_alike(
    section: bytes, record_count: int, last_offset_delta: int, message: str
) -> None:
    header = validate_batch(batch_of(section, record_count, last_offset_delta))
    _assert_twins_agree(section, header)
    with pytest.raises(CorruptBatchError, match=message):
        decode_records(section, header)
    with pytest.raises(CorruptBatchError, match=message):
        check_records(section, header)


@pytest.mark.parametrize("value_bytes", [0, 1, 63, 64, 127, 128, 8191, 8192, 1 << 20])
def test_every_varint_width_decodes_alike(value_bytes: int) -> None:
    record = encode_record(5, -(1 << 40), b"k" * 200, b"v" * value_bytes, [("h", b"x" * 70)])
    _assert_twins_agree(record, header_of(1, 5))


def test_the_longest_timestamp_varints_decode_alike() -> None:
    """Ten-byte varlongs near both ends of int64 (their sums with the first timestamp still
    in it), and one a bit beyond (refused by both)."""
    room_ms = 1 << 42  # more than the first timestamp
    for delta in (-(1 << 63) + room_ms, (1 << 63) - room_ms, -1, 1 << 62):
        _assert_twins_agree(encode_record(0, delta, None, None, None), header_of(1, 0))
    beyond = encode_varint(15) + b"\x00" + b"\xff" * 9 + b"\x03" + b"\x00\x01\x01\x00"
    _assert_twins_agree(beyond, header_of(1, 0))


def test_sums_beyond_int64_are_left_to_the_reference() -> None:
    """A timestamp or offset Python's integers hold and int64 cannot: the compiled twin
    hands it back, and ``decode_records`` answers with the reference's integers."""
    header = header_of(2, 1)
    late = header._replace(first_timestamp_ms=(1 << 63) - 2)
    section = encode_record(0, 1, None, None, None) + encode_record(1, 5, None, None, None)
    far = header._replace(base_offset=(1 << 63) - 1)
    for odd in (late, far):
        assert not _compiled().decode_into(
            section,
            odd.base_offset,
            odd.first_timestamp_ms,
            odd.last_offset_delta,
            odd.record_count,
            RecordColumns(),
            True,
        )
        assert _rows(decode_records(section, odd)) == _rows(decode_records_python(section, odd))
    assert decode_records(section, late).timestamps_ms == [(1 << 63) - 1, (1 << 63) + 3]


@settings(max_examples=500, deadline=None)
@given(damaged=damaged_sections())
def test_any_section_decodes_or_is_refused_alike(damaged: tuple[bytes, int, int]) -> None:
    section, record_count, last_offset_delta = damaged
    _assert_twins_agree(section, validate_batch(batch_of(section, record_count, last_offset_delta)))


@settings(max_examples=200, deadline=None)
@given(noise=st.binary(max_size=64), record_count=st.integers(0, 4), spare=st.integers(0, 2))
def test_noise_is_refused_alike(noise: bytes, record_count: int, spare: int) -> None:
    last_offset_delta = max(record_count - 1, 0) + spare
    _assert_twins_agree(noise, validate_batch(batch_of(noise, record_count, last_offset_delta)))


def _producer_section(record_count: int) -> bytes:
    """Records as producers send them (offset deltas 0, 1, 2, ...; no headers), of the
    sizes the door's common lane reads: one- and two-byte lengths, timestamp deltas,
    key and value sizes; null keys and values, empty ones."""
    parts = []
    for delta in range(record_count):
        key = None if delta % 7 == 3 else b"customer-%d" % (delta % 100)
        value = None if delta % 11 == 5 else b"v" * (delta * 37 % 180)
        parts.append(encode_record(delta, delta * 5 % 300 - 40, key, value, None))
    return b"".join(parts)


def _check_verdict_of_reference(section: bytes, header: BatchHeader) -> int:
    try:
        return 1 if check_records_python(section, header) else 0
    except CorruptBatchError:
        return -1


def test_the_door_common_lane_accepts_and_refuses_as_the_reference() -> None:
    """The compiled check reads producers' records in a lane of its own and hands any
    record it is not sure of to the full walk: every byte of a section of such records,
    changed to values that make lengths long or negative, sizes null, headers appear or
    offsets jump, gets the reference's verdict."""
    compiled = _compiled()
    section = _producer_section(40)
    header = header_of(40, 39)
    assert compiled.check_records(section, 39, 40) == _check_verdict_of_reference(section, header)
    assert compiled.common_lane_records(section, 39, 40) >= 38  # all but the last ones
    checked = 0
    for spot in range(len(section)):
        for byte in {0x00, 0x01, 0x02, 0x7F, 0x80, 0xFF, section[spot] ^ 0x01}:
            damaged = section[:spot] + bytes([byte]) + section[spot + 1 :]
            expected = _check_verdict_of_reference(damaged, header)
            assert compiled.check_records(damaged, 39, 40) == expected, (spot, byte)
            checked += 1
    assert checked > 7_000
    for record_count, last_offset_delta in ((40, 40), (39, 39), (41, 41), (40, 45)):
        other = header_of(record_count, last_offset_delta)
        assert compiled.check_records(
            section, last_offset_delta, record_count
        ) == _check_verdict_of_reference(section, other)


def test_the_door_common_lane_reads_three_byte_offset_deltas() -> None:
    """Past 8,191 records an offset delta takes three bytes."""
    compiled = _compiled()
    section = _producer_section(9_000)
    header = header_of(9_000, 8_999)
    assert compiled.check_records(section, 8_999, 9_000) == 0  # null keys among them
    # The lane takes all but the last records (the slack it leaves before the end).
    assert 8_990 <= compiled.common_lane_records(section, 8_999, 9_000) < 9_000
    assert check_records(section, header) is False
    start = len(_producer_section(8_500))  # a record whose offset delta has three bytes
    for spot in range(start, start + 24):  # its length, fields and the next's length
        for byte in (0x00, 0x80, 0xFF):
            damaged = section[:spot] + bytes([byte]) + section[spot + 1 :]
            expected = _check_verdict_of_reference(damaged, header)
            assert compiled.check_records(damaged, 8_999, 9_000) == expected, (spot, byte)


def test_no_extensions_forces_the_reference() -> None:
    code = (
        "from twinlog.engine.records import record_decoder as r; "
        "from twinlog.engine.base import extensions as e; print(r.COMPILED, e.describe())"
    )
    environment = {**os.environ, extensions.NO_EXTENSIONS_ENV: "1"}
    forced = subprocess.run(
        [sys.executable, "-c", code], env=environment, capture_output=True, text=True, timeout=60
    )
    assert forced.returncode == 0, forced.stderr
    assert forced.stdout.strip() == ("False pure Python (TWINLOG_NO_EXTENSIONS is set)")
    version = subprocess.run(
        [sys.executable, "-m", "twinlog.rpc.cli", "--version"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "hot loops: pure Python (TWINLOG_NO_EXTENSIONS is set)" in version.stdout, version


@pytest.mark.slow
def test_an_install_without_a_compiler_builds_the_reference(tmp_path: Path) -> None:
    """The extension is optional: with the compiler made unavailable, building the wheel
    still succeeds, says the extension failed, and ships no compiled module."""
    source = copy_of_checkout(tmp_path / "source")
    assert (source / "engine/records/_record_decoder_c.pyx").is_file()  # what would be built
    no_compiler = {**os.environ, "CC": "/bin/false", "LDSHARED": "/bin/false"}
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path / "wheels"),
            str(source),
            "-v",
        ],
        env=no_compiler,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    assert f'building extension "{COMPILED_NAME}" failed' in built.stdout + built.stderr
    wheels = list((tmp_path / "wheels").glob("twinlog-*.whl"))
    assert len(wheels) == 1, wheels
    import zipfile

    names = zipfile.ZipFile(wheels[0]).namelist()
    assert "twinlog/engine/records/record_decoder.py" in names
    assert "twinlog/setup.py" not in names  # the build's script, not the package's
    assert not [name for name in names if name.endswith((".so", ".pyd"))], names
