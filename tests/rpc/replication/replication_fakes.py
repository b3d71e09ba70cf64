"""A fake leader broker behind a real gRPC server, and a fake follower broker.

Records are 8-byte big-endian offsets, so a follower can count and check what it got
without the batch format. No tests here.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent import futures

import grpc

from twinlog.engine.base.errors import TwinlogError
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.replication.fetch_calls import (
    FetchedPartition,
    ReplicaFetch,
    ReplicaFetchPartition,
)
from twinlog.rpc.replication.service import add_replication_service

RECORD = struct.Struct(">q")
WAIT_S = 15.0  # every wait of these tests is bounded by this
FAKE_LEADER_THREADS = "fake-leader"  # the fake leader server's handler threads


def records(first: int, end: int) -> bytes:
    return b"".join(RECORD.pack(offset) for offset in range(first, end))


class FakeLeader:
    """``replica_fetch`` long-polls until a requested partition has records past its
    fetch offset; ``refuse`` answers a partition with an error, ``raise_whole`` fails the
    call. Thread rule: any thread."""

    def __init__(self, ends: dict[TopicPartition, int] | None = None) -> None:
        self.cond = threading.Condition()
        self.ends: dict[TopicPartition, int] = dict(ends or {})
        self.refuse: dict[TopicPartition, TwinlogError] = {}
        self.raise_whole: BaseException | None = None
        self.requests: list[ReplicaFetch] = []
        self.answers: list[list[FetchedPartition]] = []
        self.waiting = 0  # long polls in progress
        self.released = False

    def append(self, tp: TopicPartition, count: int) -> None:
        with self.cond:
            self.ends[tp] = self.ends.get(tp, 0) + count
            self.cond.notify_all()

    def release(self) -> None:
        """End every long poll now (a test's teardown)."""
        with self.cond:
            self.released = True
            self.cond.notify_all()

    def _has_news(self, request: ReplicaFetch) -> bool:
        return any(
            item.topic_partition in self.refuse
            or self.ends.get(item.topic_partition, 0) > item.fetch_offset
            for item in request.partitions
        )

    def _answer(self, item: ReplicaFetchPartition) -> FetchedPartition:
        tp = item.topic_partition
        refusal = self.refuse.get(tp)
        if refusal is not None:
            return FetchedPartition(tp, error=type(refusal).__name__, message=str(refusal))
        end = self.ends.get(tp, 0)
        return FetchedPartition(
            tp,
            records=records(item.fetch_offset, end),
            high_watermark=end,
            log_start_offset=0,
            log_end_offset=end,
        )

    def replica_fetch(self, request: ReplicaFetch) -> list[FetchedPartition]:
        with self.cond:
            self.requests.append(request)
            self.cond.notify_all()
            if self.raise_whole is not None:
                raise self.raise_whole
            self.waiting += 1
            try:
                self.cond.wait_for(
                    lambda: self.released or self._has_news(request), request.max_wait_ms / 1000
                )
            finally:
                self.waiting -= 1
            answer = [self._answer(item) for item in request.partitions]
            self.answers.append(answer)
            self.cond.notify_all()
            return answer

    def wait(self, predicate: Callable[[], bool], what: str) -> None:
        with self.cond:
            assert self.cond.wait_for(predicate, WAIT_S), f"timed out waiting for {what}"


class FakeFollower:
    """Follows ``partitions`` from any leader; keeps what it was handed."""

    broker_id = 2

    def __init__(self, partitions: Iterable[TopicPartition], max_wait_ms: int = 500) -> None:
        self.cond = threading.Condition()
        self.partitions = list(partitions)
        self.max_wait_ms = max_wait_ms
        self.data: dict[TopicPartition, bytearray] = {tp: bytearray() for tp in self.partitions}
        self.applied: list[tuple[int, list[FetchedPartition]]] = []
        self.requests_made = 0

    def replica_fetch_request(self, leader_id: int) -> ReplicaFetch | None:
        with self.cond:
            self.requests_made += 1
            self.cond.notify_all()
            if not self.partitions:
                return None
            return ReplicaFetch(
                replica_id=self.broker_id,
                broker_epoch=77,
                partitions=tuple(
                    ReplicaFetchPartition(tp, len(self.data[tp]) // RECORD.size, 0, 1)
                    for tp in self.partitions
                ),
                max_wait_ms=self.max_wait_ms,
            )

    def apply_replica_fetch(self, leader_id: int, fetched: Sequence[FetchedPartition]) -> None:
        with self.cond:
            self.applied.append((leader_id, list(fetched)))
            for item in fetched:
                if not item.error:
                    self.data[item.topic_partition] += item.records
            self.cond.notify_all()

    def follow(self, partitions: Iterable[TopicPartition]) -> None:
        with self.cond:
            for tp in partitions:
                self.partitions.append(tp)
                self.data.setdefault(tp, bytearray())

    def count(self, tp: TopicPartition) -> int:
        return len(self.data[tp]) // RECORD.size

    def wait(self, predicate: Callable[[], bool], what: str) -> None:
        with self.cond:
            assert self.cond.wait_for(predicate, WAIT_S), f"timed out waiting for {what}"


class LeaderServer:
    """A real gRPC server on 127.0.0.1 serving ``FakeLeader``; restartable on its port."""

    def __init__(self, leader: FakeLeader, port: int = 0) -> None:
        self.leader = leader
        # Named: a test counting the fetchers' threads tells this pool's from theirs.
        self.server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix=FAKE_LEADER_THREADS)
        )
        add_replication_service(self.server, leader)
        self.port = self.server.add_insecure_port(f"127.0.0.1:{port}")
        assert self.port, f"cannot listen on 127.0.0.1:{port}"
        self.server.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.leader.release()  # long polls answer at once, so stop() does not wait them out
        self.server.stop(0).wait(WAIT_S)
        with self.leader.cond:
            self.leader.released = False
