"""``ZooKeeperIdSource``: blocks reserved by conditional writes, so sources racing in
threads hand out disjoint ids, each source's increasing, and a restart goes higher."""

from __future__ import annotations

import threading

import pytest

from twinlog.engine.transactions.id_source import IdSource
from twinlog.engine.zookeeper.id_source import ZooKeeperIdSource
from twinlog.engine.zookeeper.session import ZooKeeperSession

BLOCK_SIZE = 7  # small: many races for blocks
IDS_PER_THREAD = 150
JOIN_S = 60.0


def test_two_sources_in_threads_hand_out_disjoint_increasing_ids(zk_connect: str) -> None:
    with ZooKeeperSession(zk_connect) as first, ZooKeeperSession(zk_connect) as second:
        sources = [ZooKeeperIdSource(first, BLOCK_SIZE), ZooKeeperIdSource(second, BLOCK_SIZE)]
        start = threading.Barrier(4)
        handed: dict[tuple[int, str], list[int]] = {}

        def take(index: int, kind: str) -> None:
            start.wait(timeout=JOIN_S)
            handed[index, kind] = [sources[index].next(kind) for _ in range(IDS_PER_THREAD)]

        threads = [
            threading.Thread(target=take, args=(index, kind))
            for index in (0, 1)
            for kind in ("producer_id", "transaction_id")
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=JOIN_S)
        assert len(handed) == 4, "a thread did not finish"
        for ids in handed.values():
            assert ids == sorted(ids) and len(set(ids)) == len(ids)
        for kind in ("producer_id", "transaction_id"):
            both = handed[0, kind] + handed[1, kind]
            assert len(set(both)) == 2 * IDS_PER_THREAD, f"{kind}: an id handed out twice"
            assert min(both) == 1
        blocks = sum(source.blocks_taken for source in sources)
        assert blocks >= 4 * IDS_PER_THREAD // BLOCK_SIZE


def test_a_restarted_source_takes_a_higher_block_and_peek_is_a_low_watermark(
    session: ZooKeeperSession,
) -> None:
    source: IdSource = ZooKeeperIdSource(session, BLOCK_SIZE)
    assert source.peek("producer_id") == 1  # nothing taken yet
    assert [source.next("producer_id") for _ in range(3)] == [1, 2, 3]
    assert source.peek("producer_id") == 4
    restarted = ZooKeeperIdSource(session, BLOCK_SIZE)
    assert restarted.peek("producer_id") == 1 + BLOCK_SIZE  # the next free block
    assert restarted.next("producer_id") == 1 + BLOCK_SIZE  # the rest of the old block is skipped
    assert source.next("producer_id") == 4  # the first source still holds its block
    assert restarted.next("transaction_id") == 1  # kinds are counted apart
    with pytest.raises(ValueError, match="kind"):
        restarted.next("group_id")
