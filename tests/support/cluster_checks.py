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

import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cluster_faults import WAIT_S, FaultCluster, wait_until
from cluster_security import READER
from cluster_workload import (
    ABORTED,
    COMMITTED,
    NEVER_COMMITTED,
    UNKNOWN,
    AckedProducer,
    TailingConsumer,
    TransactionalWriter,
)

from twinlog.engine.log.files import list_segment_base_offsets, segment_path
from twinlog.engine.log.read_only import LogReader
from twinlog.engine.records.batch_format import BatchHeader
from twinlog.engine.records.batch_reader import iter_batches
from twinlog.rpc.client.consumer import Consumer


@dataclass(frozen=True)
class Committed:
    """The committed part of a partition, as every ISR replica holds it."""

    high_watermark: int
    values: dict[int, bytes | None]  # offset -> value
    leader_epochs: list[int]  # of each batch, in order
    isr: tuple[int, ...]


def partition_directory(data_dir: Path, topic: str, partition: int = 0) -> Path:
    return data_dir / "logs" / f"{topic}-{partition}"


def holds_no_copy(directory: Path) -> bool:
    """A broker's partition directory removed, or holding no record (a client that still
    sends there may open the partition again, empty and without a role, as any broker
    opens any partition it is asked for)."""
    return not directory.exists() or not any(
        path.stat().st_size for path in directory.rglob("*.log")
    )


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
    cluster: FaultCluster,
    broker_id: int,
    topic: str,
    high_watermark: int,
    timeout_s: float,
    partition: int = 0,
) -> bytes:
    if high_watermark == 0:
        return b""
    directory = partition_directory(cluster.brokers[broker_id].data_dir, topic, partition)
    return wait_until(
        lambda: _committed_bytes(directory, high_watermark),
        f"broker {broker_id} holding {topic} up to the HW {high_watermark}",
        timeout_s,
    )


def check_replicas_agree(
    cluster: FaultCluster,
    topic: str,
    timeout_s: float = WAIT_S,
    partition: int = 0,
    replicas: tuple[int, ...] | None = None,
) -> Committed:
    """Every ISR replica byte-identical up to the leader's HW; the committed records.
    ``replicas``: the ISR to wait for (None: the partition's replicas)."""
    state = cluster.wait_in_sync(topic, replicas, timeout_s=timeout_s, partition=partition)
    with cluster.client(state.leader) as remote:
        high_watermark = remote.list_offset(topic, partition, "latest")
    copies = {
        broker_id: _wait_committed_bytes(
            cluster, broker_id, topic, high_watermark, timeout_s, partition
        )
        for broker_id in state.isr_ids
    }
    leader_copy = copies[state.leader]
    for broker_id, copy in copies.items():
        assert copy == leader_copy, (
            f"replica divergence in {topic}-{partition} below the HW {high_watermark}: broker "
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


# --- transactions ------------------------------------------------------------------------

READ_TIMEOUT_S = 60.0


def read_topic(
    cluster: FaultCluster, topic: str, partitions: int, timeout_s: float = READ_TIMEOUT_S
) -> dict[int, list[tuple[int, bytes | None]]]:
    """Every record of every partition up to its HW now, read by a plain ``Consumer`` on
    the bootstrap list (what any reader gets): partition -> [(offset, value)]."""
    ends = {}
    for partition in range(partitions):
        state = cluster.wait_in_sync(topic, partition=partition, timeout_s=timeout_s)
        with cluster.client(state.leader) as remote:
            ends[partition] = remote.list_offset(topic, partition, "latest")
    found: dict[int, list[tuple[int, bytes | None]]] = {p: [] for p in range(partitions)}
    consumer = Consumer(
        cluster.bootstrap, request_timeout_ms=5000, **cluster.client_arguments(READER)
    )
    try:
        consumer.assign([(topic, p) for p in range(partitions)])
        consumer.seek_to_beginning()
        deadline = time.monotonic() + timeout_s
        while any(consumer.position((topic, p)) < ends[p] for p in range(partitions)):
            assert time.monotonic() < deadline, f"{topic} not read up to {ends} in time"
            for record in consumer.poll(timeout_ms=500):
                found[record.partition].append((record.offset, record.value))
    finally:
        consumer.close()
    return found


def transaction_anomalies(
    read: dict[int, list[tuple[int, bytes | None]]], writers: Iterable[TransactionalWriter]
) -> dict[str, list[str]]:
    """The anomalies of CLUSTER.md §4.3 in what was read, by class (empty lists: none):
    lost write (a committed transaction's values missing, all of them), torn (some of a
    committed or unknown transaction's values missing), aborted read (anything of an
    aborted or never-committed transaction), duplicate (a value twice), non-contiguous
    (a committed transaction's values in a partition not at consecutive offsets, or not
    in the order sent), unknown (an unknown outcome neither whole nor absent)."""
    anomalies: dict[str, list[str]] = {
        "lost": [],
        "aborted-read": [],
        "duplicate": [],
        "torn": [],
        "non-contiguous": [],
        "unknown-partial": [],
    }
    where: dict[bytes | None, list[tuple[int, int]]] = {}
    for partition, records in read.items():
        for offset, value in records:
            where.setdefault(value, []).append((partition, offset))
    for value, places in where.items():
        if len(places) > 1:
            anomalies["duplicate"].append(f"{value!r} at {places}")
    for writer in writers:
        for txn in writer.transactions:
            present = [value for value in txn.all_values() if value in where]
            whole = len(present) == len(txn.all_values())
            if txn.outcome in (ABORTED, NEVER_COMMITTED):
                if present:
                    anomalies["aborted-read"].append(f"{txn.tag} ({txn.outcome}): {present}")
                continue
            if txn.outcome == UNKNOWN and not whole and present:
                anomalies["unknown-partial"].append(f"{txn.tag}: {len(present)} present")
                continue
            if txn.outcome != COMMITTED:
                continue
            if not present:
                anomalies["lost"].append(f"{txn.tag}: none of {txn.all_values()}")
                continue
            if not whole:
                anomalies["torn"].append(f"{txn.tag}: {len(present)} of {len(txn.all_values())}")
                continue
            for partition, values in txn.values.items():
                places = [where[value][0] for value in values]
                offsets = [offset for _p, offset in places]
                if {p for p, _o in places} != {partition} or offsets != list(
                    range(offsets[0], offsets[0] + len(offsets))
                ):
                    anomalies["non-contiguous"].append(f"{txn.tag} p{partition}: {places}")
    return anomalies


def check_transactions(
    cluster: FaultCluster, topic: str, partitions: int, writers: Iterable[TransactionalWriter]
) -> dict[int, list[tuple[int, bytes | None]]]:
    """Every partition's replicas agree, and every committed transaction is read exactly
    once and whole, nothing of an aborted one, an unknown one all or nothing; what was read."""
    for partition in range(partitions):
        check_replicas_agree(cluster, topic, partition=partition)
    read = read_topic(cluster, topic, partitions)
    found = {kind: items for kind, items in transaction_anomalies(read, writers).items() if items}
    assert not found, f"anomalies: {found}"
    return read
