"""A coordinator's checkpoint pointer in ZooKeeper: ``coordinators/<N>``.

``CheckpointPointerStore`` (``twinlog.journal.txn_checkpoint_pointer``) with
conditional writes: the store remembers the zkVersion it last read or wrote, and a
write names it. A write that finds another version (another coordinator wrote the
pointer since) raises ConditionalWriteLostError and writes nothing: the pointer of
the newer coordinator is never overwritten by a zombie. A store that has read no
pointer expects none, so its first write is a create.

The value carries the writer's coordinator epoch (0 until coordinators have epochs)
so that whoever reads the pointer can tell which coordinator wrote it.

Thread rule: one coordinator's thread.
"""

from __future__ import annotations

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from twinlog.engine.base.errors import ConditionalWriteLostError, CorruptJournalError
from twinlog.engine.zookeeper import znodes
from twinlog.engine.zookeeper.session import ZooKeeperSession
from twinlog.journal.txn_checkpoint_pointer import CheckpointPointer

KEYS = ("coordinator_epoch", "checkpoint_offset", "replay_from_offset")
ABSENT = -1  # the version a store expects before the pointer is first written


class ZooKeeperCheckpointPointer:
    def __init__(
        self, session: ZooKeeperSession, journal_partition: int, coordinator_epoch: int = 0
    ) -> None:
        self.session = session
        self.path = znodes.coordinator_path(journal_partition)
        self.coordinator_epoch = coordinator_epoch
        self.version = ABSENT  # zkVersion last read or written

    def read(self) -> CheckpointPointer | None:
        client = self.session.client
        try:
            data, stat = self.session.wait(client.get_async(self.path))
        except NoNodeError:
            self.version = ABSENT
            return None
        value = znodes.decode(self.path, data, KEYS)
        self.version = stat.version
        try:
            published = value.get("low_watermark")
            pointer = CheckpointPointer(
                int(value["checkpoint_offset"]),
                int(value["replay_from_offset"]),
                None if published is None else int(published),
            )
        except (ValueError, TypeError) as error:
            raise CorruptJournalError(f"ZooKeeper znode {self.path}: {error}") from None
        if not 0 <= pointer.replay_from_offset <= pointer.checkpoint_offset:
            raise CorruptJournalError(
                f"ZooKeeper znode {self.path}: replay_from_offset {pointer.replay_from_offset} "
                f"is not within 0..checkpoint_offset {pointer.checkpoint_offset}"
            )
        return pointer

    def write(self, pointer: CheckpointPointer) -> None:
        data = znodes.encode(
            {
                "coordinator_epoch": self.coordinator_epoch,
                "checkpoint_offset": pointer.checkpoint_offset,
                "replay_from_offset": pointer.replay_from_offset,
                "low_watermark": pointer.low_watermark,
            }
        )
        client = self.session.client
        try:
            if self.version == ABSENT:
                self.session.wait(client.create_async(self.path, data))
                self.version = 0
            else:
                stat = self.session.wait(client.set_async(self.path, data, self.version))
                self.version = stat.version
        except (BadVersionError, NodeExistsError, NoNodeError):
            expected = "no pointer" if self.version == ABSENT else f"version {self.version}"
            raise ConditionalWriteLostError(
                f"ZooKeeper znode {self.path} changed since this coordinator read it (expected "
                f"{expected}): another coordinator of this journal partition took over; this one "
                "must stop"
            ) from None
