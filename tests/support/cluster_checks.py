"""What must hold at the end of every cluster fault case (CLUSTER.md §4.3).

    committed = check_replicas_agree(cluster, topic)   # replica divergence
    check_history(committed, producer, consumers)       # lost, duplicated, inconsistent

``check_replicas_agree`` waits until the partition has a running leader whose ISR is
every broker with its current broker epoch, reads the leader's high watermark (HW), and
then compares every ISR replica's data log, batch by batch and byte for byte (the
leader epoch stamped in each batch included), up to that HW. Each replica is read from
its files (``LogReader``: no recovery, nothing written, never past the HW that replica
has published), so a follower that has not yet learnt the HW is waited for. It returns
the committed records, by offset.

``check_history``: every acknowledged value at its acknowledged offset (nothing
acknowledged lost), no value twice (an idempotent retry never written twice), and every
(offset, value) a consumer saw during the faults still there (it never read past a HW,
and no offset was reused for another value: F23).

``raw_batches`` reads a data log's files past any HW (what a dead or cut replica holds
that nobody acknowledged: a zombie's suffix).

No tests here. Thread rule: the test's thread.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cluster_faults import WAIT_S, FaultCluster, wait_until
from cluster_workload import AckedProducer, TailingConsumer

from twinlog.engine.log.files import list_segment_base_offsets, segment_path
from twinlog.engine.log.read_only import LogReader
from twinlog.engine.records.batch_format import BatchHeader
from twinlog.engine.records.batch_reader import iter_batches


@dataclass(frozen=True)
class Committed:
    """The committed part of a partition, as every ISR replica holds it."""

    high_watermark: int
    values: dict[int, bytes | None]  # offset -> value
    leader_epochs: list[int]  # of each batch, in order
    isr: tuple[int, ...]


def partition_directory(data_dir: Path, topic: str, partition: int = 0) -> Path:
    return data_dir / "logs" / f"{topic}-{partition}"


def raw_batches(directory: Path) -> list[tuple[BatchHeader, bytes]]:
    """Every whole batch in a data log's segment files, past any HW; a torn or
    half-written last batch is left out."""
    found: list[tuple[BatchHeader, bytes]] = []
    if not directory.exists():
        return found
    for base_offset in list_segment_base_offsets(directory):
        data = segment_path(directory, base_offset).read_bytes()
        for one in iter_batches(data, allow_partial_tail=True):
            found.append((one.header, bytes(one.buffer)))
    return found


def raw_values(directory: Path) -> dict[int, bytes | None]:
    return {
        record.offset: record.value
        for _header, data in raw_batches(directory)
        for one in iter_batches(data)
        for record in one.records()
    }


def _committed_bytes(directory: Path, high_watermark: int) -> bytes | None:
    """The batches below ``high_watermark`` as this replica's files hold them, or None
    while the replica has not published that far."""
    chunks = []
    end = LogReader(directory).log_start_offset()
    for header, view in LogReader(directory).iter_batches(to_offset=high_watermark):
        chunks.append(bytes(view))
        end = header.next_offset
    return b"".join(chunks) if end >= high_watermark else None


def _wait_committed_bytes(
    cluster: FaultCluster, broker_id: int, topic: str, high_watermark: int, timeout_s: float
) -> bytes:
    if high_watermark == 0:
        return b""
    directory = partition_directory(cluster.brokers[broker_id].data_dir, topic)
    return wait_until(
        lambda: _committed_bytes(directory, high_watermark),
        f"broker {broker_id} holding {topic} up to the HW {high_watermark}",
        timeout_s,
    )


def check_replicas_agree(cluster: FaultCluster, topic: str, timeout_s: float = WAIT_S) -> Committed:
    """Every ISR replica byte-identical up to the leader's HW; the committed records."""
    state = cluster.wait_in_sync(topic, timeout_s=timeout_s)
    with cluster.client(state.leader) as remote:
        high_watermark = remote.list_offset(topic, 0, "latest")
    copies = {
        broker_id: _wait_committed_bytes(cluster, broker_id, topic, high_watermark, timeout_s)
        for broker_id in state.isr_ids
    }
    leader_copy = copies[state.leader]
    for broker_id, copy in copies.items():
        assert copy == leader_copy, (
            f"replica divergence in {topic} below the HW {high_watermark}: broker "
            f"{broker_id} holds {_describe(copy)}, the leader {state.leader} holds "
            f"{_describe(leader_copy)}"
        )
    batches = list(iter_batches(leader_copy))
    return Committed(
        high_watermark,
        {record.offset: record.value for one in batches for record in one.records()},
        [one.header.partition_leader_epoch for one in batches],
        state.isr_ids,
    )


def _describe(data: bytes) -> str:
    headers = [one.header for one in iter_batches(data)]
    return f"{len(headers)} batches, (base offset, leader epoch) {_pairs(headers)}"


def _pairs(headers: Iterable[BatchHeader]) -> list[tuple[int, int]]:
    return [(header.base_offset, header.partition_leader_epoch) for header in headers]


def check_history(
    committed: Committed,
    producers: Iterable[AckedProducer],
    consumers: Iterable[TailingConsumer] = (),
) -> None:
    """Nothing acknowledged lost, nothing written twice, no consumer read undone."""
    values = committed.values
    for producer in producers:
        lost = {
            value: offset
            for value, offset in producer.acknowledged.items()
            if values.get(offset) != value
        }
        assert not lost, (
            f"acknowledged and lost (value: acknowledged offset -> now there): "
            f"{ {value: (offset, values.get(offset)) for value, offset in lost.items()} }"
        )
    twice = [value for value, count in Counter(values.values()).items() if count > 1]
    assert not twice, f"values written twice: {twice[:10]}"
    for consumer in consumers:
        offsets = [offset for offset, _value in consumer.seen]
        assert offsets == sorted(set(offsets)), "a consumer's offsets went back or repeated"
        undone = [(offset, value) for offset, value in consumer.seen if values.get(offset) != value]
        assert not undone, (
            f"a consumer read what is not committed (offset, value seen -> now): "
            f"{[(offset, value, values.get(offset)) for offset, value in undone[:10]]}"
        )
