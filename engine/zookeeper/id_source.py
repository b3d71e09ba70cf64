"""``ZooKeeperIdSource``: producer and transaction ids from blocks reserved in ZooKeeper.

Kafka's ProducerIdManager in ZooKeeper mode: ``id_blocks/<kind>`` holds the start of
the next free block; a source takes a block of ``block_size`` by reading it and
writing it back advanced, conditional on the zkVersion it read. Two sources (two
brokers, or two coordinators of one broker) that race for a block: one write wins,
the other gets BadVersion, reads again and takes the next block. So every id of a
kind is handed out once in the cluster, and each source's ids increase. A restart
takes a fresh block; the unused rest of the last one is skipped.

A source that loses ``RESERVE_ATTEMPTS_MAX`` races in a row gives up with
ConditionalWriteLostError (with ZooKeeper's write rate, losing that many means
something is writing the znode in a loop).

Thread-safe: any thread may call ``next`` and ``peek`` (one lock; a block is
reserved under it, as ``LocalIdSource`` writes its file under its lock).
"""

from __future__ import annotations

import threading

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from twinlog.engine.base.errors import ConditionalWriteLostError, CorruptJournalError
from twinlog.engine.transactions.id_source import ID_KINDS
from twinlog.engine.zookeeper import znodes
from twinlog.engine.zookeeper.session import ZooKeeperSession

BLOCK_SIZE = 1000  # CLUSTER.md §3.7; one ZooKeeper write per 1,000 ids
FIRST_ID = 1  # as LocalIdSource: id 0 is never handed out
RESERVE_ATTEMPTS_MAX = 100
KEYS = ("next_block_start",)


class ZooKeeperIdSource:
    def __init__(self, session: ZooKeeperSession, block_size: int = BLOCK_SIZE) -> None:
        if block_size < 1:
            raise ValueError(f"block_size is {block_size}, expected 1 or more")
        self.session = session
        self.block_size = block_size
        self.blocks_taken = 0
        self._lock = threading.Lock()
        self._next = dict.fromkeys(ID_KINDS, 0)
        self._block_end = dict.fromkeys(ID_KINDS, 0)  # next == end: no block held
        session.wait(session.client.ensure_path_async(znodes.ID_BLOCKS))

    def next(self, kind: str) -> int:
        """The next id of ``kind``: reserves a block in ZooKeeper when the one held is used up."""
        self._checked(kind)
        with self._lock:
            if self._next[kind] >= self._block_end[kind]:
                start = self._reserve_block(kind)
                self._next[kind], self._block_end[kind] = start, start + self.block_size
            value = self._next[kind]
            self._next[kind] = value + 1
            return value

    def peek(self, kind: str) -> int:
        """The id ``next(kind)`` would return now: from the block held, else the cluster's
        next free block (another source may take that one first: ``next`` is then higher)."""
        self._checked(kind)
        with self._lock:
            if self._next[kind] < self._block_end[kind]:
                return self._next[kind]
            next_block_start, _version = self._read(kind)
            return next_block_start

    def _read(self, kind: str) -> tuple[int, int]:
        """(next free block's start, zkVersion); (FIRST_ID, -1) if no block was ever taken."""
        path = znodes.id_block_path(kind)
        try:
            data, stat = self.session.wait(self.session.client.get_async(path))
        except NoNodeError:
            return FIRST_ID, -1
        try:
            start = int(znodes.decode(path, data, KEYS)["next_block_start"])
        except (ValueError, TypeError) as error:
            raise CorruptJournalError(f"ZooKeeper znode {path}: {error}") from None
        return start, stat.version

    def _reserve_block(self, kind: str) -> int:
        path = znodes.id_block_path(kind)
        client = self.session.client
        for _attempt in range(RESERVE_ATTEMPTS_MAX):
            start, version = self._read(kind)
            taken = znodes.encode({"next_block_start": start + self.block_size})
            try:
                if version == -1:
                    self.session.wait(client.create_async(path, taken))
                else:
                    self.session.wait(client.set_async(path, taken, version))
            except (BadVersionError, NodeExistsError):
                continue  # another source took this block: read again, take the next one
            self.blocks_taken += 1
            return start
        raise ConditionalWriteLostError(
            f"ZooKeeper znode {path}: lost {RESERVE_ATTEMPTS_MAX} races in a row for an id "
            "block; is something rewriting it in a loop?"
        )

    @staticmethod
    def _checked(kind: str) -> str:
        if kind not in ID_KINDS:
            raise ValueError(f"id kind {kind!r} is not one of {ID_KINDS}")
        return kind
