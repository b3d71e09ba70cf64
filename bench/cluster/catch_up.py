"""Catch-up of a restarted follower: how fast does it copy what it missed?

A follower of a one-partition topic is stopped (SIGTERM: the controller takes it out
of the ISR), ``catch_up_mib`` MiB are produced to the leader in 1 MiB batches (acks=all
with the two replicas left), then the follower is started again. Timed from its registration in
ZooKeeper (before that it is a Python process starting and opening its data
directory) until its data log holds as many bytes as the leader's: replicas are
byte-identical, and the leader takes no writes meanwhile, so equal sizes mean equal
log ends. The ISR rejoin (the leader's conditional write in ZooKeeper) is reported too.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bench.cluster.cluster import BenchCluster
from bench.cluster.settings import MIB, BenchSettings
from bench.cluster.timeline import Timeline
from bench.cluster.waiting import wait_for
from twinlog.engine.log.files import list_segment_base_offsets, segment_path
from twinlog.engine.records.batch_builder import RecordBatchBuilder
from twinlog.rpc.client.connection_options import ConnectionOptions
from twinlog.rpc.client.remote import RemoteBroker


def produce_mib(address: str, topic: str, settings: BenchSettings, partition: int = 0) -> float:
    """``catch_up_mib`` MiB to ``partition``, one 1 MiB batch per request; MiB/s."""
    payloads = settings.payloads()
    records_per_batch = MIB // settings.record_bytes
    options = ConnectionOptions(request_timeout_ms=round(settings.phase_timeout_s * 1000))
    started_s = time.monotonic()
    with RemoteBroker(address, options) as client:
        for number in range(settings.catch_up_mib):
            builder = RecordBatchBuilder("none")
            for index in range(records_per_batch):
                builder.append(payloads[(number + index) % len(payloads)])
            client.produce(topic, partition, builder.build())
    return settings.catch_up_mib / (time.monotonic() - started_s)


def segment_bytes(directory: Path) -> int:
    """Bytes in the data log's segment files (their sizes are their contents: segments
    are not preallocated)."""
    if not directory.is_dir():
        return 0
    return sum(
        segment_path(directory, base).stat().st_size
        for base in list_segment_base_offsets(directory)
    )


def _in_isr(cluster: BenchCluster, topic: str, broker_id: int) -> bool:
    state = cluster.state(topic, 0)
    return state is not None and broker_id in state.isr_ids


def follower_catch_up(cluster: BenchCluster, topic: str, settings: BenchSettings) -> dict[str, Any]:
    state = cluster.create_topic(topic, 1)[0]
    controller = cluster.controller_id()
    followers = [broker_id for broker_id in state.isr_ids if broker_id != state.leader]
    follower = next((b for b in followers if b != controller), followers[0])
    leader = state.leader
    timeout_s = settings.phase_timeout_s

    cluster.brokers[follower].terminate()
    wait_for(
        f"broker {follower} out of the ISR",
        lambda: not _in_isr(cluster, topic, follower),
        timeout_s,
    )
    produced_mib_per_s = produce_mib(cluster.brokers[leader].address, topic, settings)

    leader_dir = cluster.partition_dir(leader, topic, 0)
    follower_dir = cluster.partition_dir(follower, topic, 0)
    target_bytes = segment_bytes(leader_dir)
    behind_bytes = target_bytes - segment_bytes(follower_dir)
    probes = {
        "registered": lambda: cluster.registered(follower),
        "caught_up": lambda: segment_bytes(follower_dir) >= target_bytes,
        "in_isr": lambda: _in_isr(cluster, topic, follower),
    }
    with Timeline(probes, timeout_s) as timeline:
        cluster.brokers[follower].start()
        spawned_s = cluster.brokers[follower].started_s
        wait_for(
            "the follower caught up and in the ISR",
            lambda: len(timeline.first_true_s) == len(probes),
            timeout_s,
        )
    registered_s = timeline.require("registered")
    # Both can be seen in one poll round for a tiny backlog: never divide by zero.
    caught_up_s = max(timeline.require("caught_up") - registered_s, 1e-6)
    return {
        "follower": follower,
        "leader": leader,
        "bytes_behind": behind_bytes,
        "catch_up_s": caught_up_s,
        "catch_up_mib_per_s": behind_bytes / MIB / caught_up_s,
        "spawn_to_registered_s": registered_s - spawned_s,
        "registered_to_isr_s": timeline.require("in_isr") - registered_s,
        "produce_with_isr_2_mib_per_s": produced_mib_per_s,
    }
