"""twinlog dump: a segment a broker wrote, batch by batch and record by record; damage named."""

from __future__ import annotations

from pathlib import Path

import pytest
from log_support import batch_positions, flip_bit

from twinlog.engine.broker import Broker
from twinlog.rpc.cli.main import main
from twinlog.rpc.client import Admin, Producer


@pytest.fixture(scope="module")
def segment(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data_dir = tmp_path_factory.mktemp("dump") / "data"
    with Broker.open(data_dir) as broker:
        Admin(broker).create_topic("orders", partitions=1)
        with Producer(broker) as producer:
            producer.send(
                "orders", b"v1", key=b"k\xff", partition=0, headers=[("h", b"1"), ("h", None)]
            )
            producer.send("orders", None, partition=0, timestamp_ms=1_700_000_000_000)
            producer.flush()
            producer.send("orders", b"", key=b"", partition=0)
    [path] = sorted((data_dir / "logs" / "orders-0").glob("*.log"))
    return path


def dump(capsys: pytest.CaptureFixture[str], *arguments: str) -> tuple[int, str, str]:
    status = main(["dump", *arguments])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_each_batch_and_record_of_a_brokers_segment(
    capsys: pytest.CaptureFixture[str], segment: Path
) -> None:
    status, out, err = dump(capsys, str(segment), "--print-payload")
    assert status == 0, err
    lines = out.splitlines()
    assert lines[:2] == [f"Dumping {segment}", "Starting offset: 0"]
    batches = [line for line in lines if line.startswith("baseOffset:")]
    records = [line for line in lines if line.startswith("| offset:")]
    assert len(batches) == 2 and len(records) == 3
    assert batches[0].startswith("baseOffset: 0 lastOffset: 1 count: 2 baseSequence: 0 ")
    assert "isTransactional: false isControl: false position: 0 " in batches[0]
    assert "compresscodec: zstd" in batches[0] and batches[0].endswith("isvalid: true")
    second_position = batch_positions(segment)[1][0]
    assert "baseOffset: 2 lastOffset: 2 count: 1 " in batches[1]
    assert f"position: {second_position} " in batches[1]
    assert records[0].endswith(
        "keySize: 2 valueSize: 2 headerKeys: [h,h] key: k\\xff payload: v1 headers: [h:1,h:null]"
    )
    assert records[1] == (
        "| offset: 1 CreateTime: 1700000000000 keySize: -1 valueSize: -1 headerKeys: [] "
        "key: null payload: null headers: []"
    )
    assert records[2].endswith("keySize: 0 valueSize: 0 headerKeys: [] key:  payload:  headers: []")
    assert err == "2 batches, 3 records\n"


def test_without_print_records_only_batches(
    capsys: pytest.CaptureFixture[str], segment: Path
) -> None:
    status, out, err = dump(capsys, str(segment))
    assert status == 0 and "| offset" not in out and err == "2 batches\n"
    status, deep, err = dump(capsys, str(segment), "--deep")  # decoded, not printed
    assert status == 0 and deep == out and err == "2 batches, 3 records\n"


def test_a_flipped_byte_names_the_batch_and_the_walk_goes_on(
    capsys: pytest.CaptureFixture[str], segment: Path, tmp_path: Path
) -> None:
    damaged = tmp_path / segment.name
    damaged.write_bytes(segment.read_bytes())
    flip_bit(damaged, 80)  # in the first batch's records, under its CRC
    status, out, err = dump(capsys, str(damaged), "--print-records")
    assert status == 1
    assert "isvalid: false (the bytes give 0x" in out
    assert "position: 0 damaged: CorruptBatchError: batch CRC-32C mismatch" in out
    assert len([line for line in out.splitlines() if line.startswith("| offset:")]) == 1
    assert err == "error: 1 damaged (first at position 0); 2 batches, 1 record read\n"


def test_a_damaged_length_ends_the_walk(
    capsys: pytest.CaptureFixture[str], segment: Path, tmp_path: Path
) -> None:
    second = batch_positions(segment)[1][0]
    damaged = tmp_path / segment.name
    data = bytearray(segment.read_bytes())
    data[second + 8 : second + 12] = b"\x7f\xff\xff\xff"  # the second batch's length field
    damaged.write_bytes(bytes(data))
    status, out, _ = dump(capsys, str(damaged))
    assert status == 1
    assert f"position: {second} damaged: CorruptBatchError: batch length field is" in out
    assert out.splitlines()[-1] == (
        f"the walk stops at position {second}: the next batch cannot be found"
    )


def test_index_files_print_their_entries(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    index = tmp_path / "00000000000000000100.index"
    index.write_bytes(bytes.fromhex("00000000 00000000 00000005 00001000"))
    status, out, _ = dump(capsys, str(index))
    assert status == 0
    assert out.splitlines()[1:] == [
        "Starting offset: 100",
        "offset: 100 position: 0",
        "offset: 105 position: 4096",
    ]
    time_index = tmp_path / "00000000000000000100.timeindex"
    time_index.write_bytes(bytes.fromhex("0000018bcfe56800 00000005") + b"\x00")
    status, out, _ = dump(capsys, str(time_index))
    assert status == 1
    assert "timestamp: 1700000000000 offset: 105" in out
    assert "position: 12 damaged: ValueError: 1 bytes after the last whole 12-byte entry" in out


def test_a_missing_file_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    status, _, err = dump(capsys, str(tmp_path / "none.log"))
    assert (
        status == 2
        and err == f"error: cannot read {tmp_path / 'none.log'}: No such file or directory\n"
    )
