"""The high watermarks of a broker's partitions, checkpointed (Kafka's
``replication-offset-checkpoint``), so that a restarted replica serves what was committed
at once instead of from its log start until its leader's fetches tell it again.

    DATA_DIR/replication-offset-checkpoint :=
        "0"                          the format's version (Kafka's)
        N                            how many lines follow
        N x "TOPIC PARTITION OFFSET"  each partition's high watermark

Written every ``replica_high_watermark_checkpoint_interval_ms`` (5 s, Kafka's default) by
a cluster broker and at its clean close, replaced atomically (``atomic_file``). Read once,
at open: each partition starts its high watermark there, clamped to its log (a log cut
since, by a crash's recovery or a truncation, lowers it; nothing raises it past the log
end). A checkpoint older than the last high watermark is safe: it is lower. A file that
does not parse is said once and ignored: the replicas start from their log starts, as
without one.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from twinlog.engine.base.atomic_file import replace_file
from twinlog.engine.base.errors import DiskFullError
from twinlog.engine.base.types import TopicPartition

log = logging.getLogger(__name__)

CHECKPOINT_FILE = "replication-offset-checkpoint"
VERSION = 0


def encode(values: Mapping[TopicPartition, int]) -> bytes:
    lines = [str(VERSION), str(len(values))]
    lines += [f"{tp.topic} {tp.partition} {offset}" for tp, offset in sorted(values.items())]
    return ("\n".join(lines) + "\n").encode()


def decode(data: bytes) -> dict[TopicPartition, int]:
    """ValueError naming what is wrong, for a file not in the format above."""
    lines = data.decode().splitlines()
    if len(lines) < 2 or lines[0] != str(VERSION):
        raise ValueError(f"the first line is {lines[:1]!r}, expected version {VERSION}")
    count = int(lines[1])
    entries = lines[2:]
    if count != len(entries):
        raise ValueError(f"it announces {count} partitions and holds {len(entries)}")
    values: dict[TopicPartition, int] = {}
    for line in entries:
        topic, partition, offset = line.split(" ")
        if int(offset) < 0 or int(partition) < 0:
            raise ValueError(f"line {line!r} holds a negative number")
        values[TopicPartition(topic, int(partition))] = int(offset)
    return values


class HighWatermarkCheckpoint:
    """Thread rule: ``read`` at open; ``write`` from the checkpoint task or the close."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / CHECKPOINT_FILE
        self._written: dict[TopicPartition, int] | None = None
        self._failing = False  # the last write failed (said once until one succeeds)

    def read(self) -> dict[TopicPartition, int]:
        """The checkpointed high watermarks; {} when there is no file or it is unreadable."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        try:
            values = decode(data)
        except (ValueError, UnicodeDecodeError) as error:
            log.warning(
                "%s is not a high-watermark checkpoint (%s): ignored; replicas start their "
                "high watermarks at their log starts",
                self.path,
                error,
            )
            return {}
        self._written = values
        return values

    def write(self, values: Mapping[TopicPartition, int]) -> bool:
        """Replace the file with ``values``, unless it holds them already; True if written.
        A failure (a full disk) keeps the older file, which is only lower: said once per
        run of failures, not raised (the close and the periodic task go on)."""
        if values == self._written:
            return False
        try:
            replace_file(self.path, encode(values), durable=False)  # older is lower: safe
        except (DiskFullError, OSError) as error:
            if not self._failing:
                log.warning(
                    "%s not written (%s): the older checkpoint stays, and a restart starts "
                    "the high watermarks there, lower",
                    self.path,
                    error,
                )
            self._failing = True
            return False
        self._failing = False
        self._written = dict(values)
        return True
