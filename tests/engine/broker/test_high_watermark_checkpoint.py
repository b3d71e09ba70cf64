"""The high watermarks are checkpointed (Kafka's replication-offset-checkpoint): a broker's
close writes each partition's, and a partition opened again starts there (clamped to its
log) instead of at its log start; an unreadable file is ignored, never fatal."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from broker_support import batch

from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.broker import Broker
from twinlog.engine.broker.high_watermark_checkpoint import (
    CHECKPOINT_FILE,
    HighWatermarkCheckpoint,
    decode,
    encode,
)

CONFIG = {"journal_partitions": 1, "offsets_partitions": 1}
ORDERS_0, ORDERS_1 = TopicPartition("orders", 0), TopicPartition("orders", 1)


def test_the_format_reads_back_and_a_bad_file_is_refused_by_name() -> None:
    values = {ORDERS_1: 7, ORDERS_0: 3, TopicPartition("a.b-c", 12): 0}
    assert encode(values).decode().splitlines()[:3] == ["0", "3", "a.b-c 12 0"]
    assert decode(encode(values)) == values
    for data, says in [
        (b"1\n0\n", "version"),
        (b"0\n2\norders 0 1\n", "announces 2 partitions and holds 1"),
        (b"0\n1\norders 0 -1\n", "negative"),
        (b"0\n1\norders 0\n", "not enough values"),
    ]:
        with pytest.raises(ValueError, match=says):
            decode(data)


def test_a_close_checkpoints_every_partitions_high_watermark(tmp_path: Path) -> None:
    with Broker.open(tmp_path, **CONFIG) as broker:
        broker.create_topic("orders", 2)
        for _ in range(3):
            broker.produce("orders", 0, batch([b"v"]))
    values = HighWatermarkCheckpoint(tmp_path).read()
    assert values[ORDERS_0] == 3 and values[ORDERS_1] == 0


def test_the_start_is_the_checkpoint_clamped_to_the_log(tmp_path: Path) -> None:
    """A partition opened again starts its high watermark at the checkpoint, before any
    role: what a restarted replica serves before its leader's fetches tell it more."""
    with Broker.open(tmp_path, **CONFIG) as broker:
        broker.create_topic("orders", 2)
        for _ in range(3):
            broker.produce("orders", 0, batch([b"v"]))
        manager = broker.partition_manager
        for checkpointed, expected in [(2, 2), (99, 3), (None, 0)]:
            manager.remove(ORDERS_0).close()
            broker.journal.close_partition(str(ORDERS_0))
            manager._checkpointed = {} if checkpointed is None else {ORDERS_0: checkpointed}
            reopened = manager.open(ORDERS_0, {})
            assert reopened.high_watermark.value == expected, checkpointed


def test_an_unreadable_checkpoint_is_said_and_ignored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with Broker.open(tmp_path, **CONFIG) as broker:
        broker.create_topic("orders", 1)
    (tmp_path / CHECKPOINT_FILE).write_bytes(b"garbage\x00")
    with caplog.at_level(logging.WARNING):
        with Broker.open(tmp_path, **CONFIG) as broker:
            assert broker.produce("orders", 0, batch([b"v"])).base_offset == 0
    assert "is not a high-watermark checkpoint" in caplog.text
    assert HighWatermarkCheckpoint(tmp_path).read()[ORDERS_0] == 1  # written anew at close


def test_a_write_that_fails_is_said_once_and_keeps_the_older_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    checkpoint = HighWatermarkCheckpoint(tmp_path)
    assert checkpoint.write({ORDERS_0: 1})
    blocker = tmp_path / f".{CHECKPOINT_FILE}.tmp"  # where the new file is written first
    blocker.mkdir()
    with caplog.at_level(logging.WARNING):
        assert not checkpoint.write({ORDERS_0: 2})
        assert not checkpoint.write({ORDERS_0: 3})  # not raised, and not said again
    assert caplog.text.count("the older checkpoint stays") == 1
    assert HighWatermarkCheckpoint(tmp_path).read() == {ORDERS_0: 1}
    blocker.rmdir()
    assert checkpoint.write({ORDERS_0: 4})
    assert HighWatermarkCheckpoint(tmp_path).read() == {ORDERS_0: 4}
