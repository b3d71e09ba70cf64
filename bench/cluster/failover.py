"""Leader failover, timed from the fault to the first acknowledged ``acks=all`` produce.

A client (``FollowingWriter``, 100 ms retry backoff) writes to the partition before,
during and after the fault. The partition chosen is one whose leader is not the
controller, so the figure is a leader failover, not a controller failover too.

SIGKILL, split by what ZooKeeper shows (polled every 10 ms):

    session expiry       kill -> the leader's registration (ephemeral znode) is gone
    controller reaction  -> a new leader is written in the partition's state znode
    promotion            -> the new leader acknowledges a first write (the promotion
                            barrier, the remaining follower fetching from it); seen by a
                            probe writer retrying every 10 ms once the new leader is written
    client refresh       -> the 100 ms-backoff client's first acknowledgement

SIGTERM (controlled shutdown): the same, without session expiry (the broker asks the
controller to move its leaderships before it leaves); the client's write pause is the
time between the old leader's last acknowledgement and the new leader's first.
"""

from __future__ import annotations

import signal
import time
from typing import Any

from bench.cluster.cluster import BenchCluster
from bench.cluster.following_writer import Ack, FollowingWriter
from bench.cluster.settings import BenchSettings
from bench.cluster.timeline import Timeline
from bench.cluster.waiting import wait_for
from twinlog.engine.zookeeper.partition_state import PartitionState

CLIENT_BACKOFF_MS = 100
PROBE_BACKOFF_MS = 10
ACKS_BEFORE_FAULT = 5


def choose_partition(cluster: BenchCluster, topic: str, partitions: int) -> tuple[int, int]:
    """(partition, its leader): one not led by the controller when there is one."""
    controller = cluster.controller_id()
    states = {p: cluster.wait_full_isr(topic, p) for p in range(partitions)}
    for partition, state in states.items():
        if state.leader != controller:
            return partition, state.leader
    return 0, states[0].leader


def _led_by_other(cluster: BenchCluster, topic: str, partition: int, old: int) -> bool:
    state: PartitionState | None = cluster.state(topic, partition)
    return state is not None and state.leader > 0 and state.leader != old


def _first_ack(writer: FollowingWriter, after_s: float, old: int) -> Ack | None:
    if writer.fatal is not None:
        raise RuntimeError(f"the failover writer failed: {writer.fatal!r}") from writer.fatal
    return writer.first_ack_after(after_s, not_from=old)


def _timed_failover(
    cluster: BenchCluster, topic: str, partitions: int, settings: BenchSettings, kill: bool
) -> dict[str, Any]:
    """Fault the leader of one partition; the raw times, relative to the fault."""
    partition, old = choose_partition(cluster, topic, partitions)
    timeout_s = settings.phase_timeout_s
    payload = settings.payloads()[0]
    client = FollowingWriter(cluster, topic, partition, payload, CLIENT_BACKOFF_MS, "client")
    prober = FollowingWriter(cluster, topic, partition, payload, PROBE_BACKOFF_MS, "prober")
    process = cluster.brokers[old]
    probes = {
        "registration_gone": lambda: not cluster.registered(old),
        "new_leader_written": lambda: _led_by_other(cluster, topic, partition, old),
        "old_leader_exited": lambda: not process.running,
    }
    client.start()
    try:
        wait_for(
            "the client's first acknowledgements",
            lambda: _first_ack(client, 0, -1) and len(client.acks) >= ACKS_BEFORE_FAULT,
            timeout_s,
        )
        with Timeline(probes, timeout_s) as timeline:
            fault_s = time.monotonic()
            process.signal(signal.SIGKILL if kill else signal.SIGTERM)
            # The probe starts once there is a new leader to probe: before that it could
            # only hammer ZooKeeper and the dead broker.
            wait_for("a new leader", lambda: timeline.seen("new_leader_written"), timeout_s, 0.005)
            prober.start()
            client_ack = wait_for(
                "the client's first acknowledgement by the new leader",
                lambda: _first_ack(client, fault_s, old),
                timeout_s,
            )
            probe_ack = wait_for(
                "the probe's first acknowledgement", lambda: _first_ack(prober, 0, old), timeout_s
            )
            wait_for("the old leader's exit", lambda: timeline.seen("old_leader_exited"), timeout_s)
    finally:
        client.stop()
        prober.stop()
    # The old leader may still acknowledge after a SIGTERM, until it hands over.
    last_old = client.last_ack_from(old, before_s=client_ack.time_s)
    first_accept_s = min(probe_ack.time_s, client_ack.time_s)
    times = {
        "partition": partition,
        "old_leader": old,
        "new_leader": client_ack.broker_id,
        "new_leader_written_s": timeline.require("new_leader_written") - fault_s,
        "new_leader_first_write_s": first_accept_s - fault_s,
        "client_first_ack_s": client_ack.time_s - fault_s,
        "old_leader_exited_s": timeline.require("old_leader_exited") - fault_s,
        "client_write_pause_s": client_ack.time_s - (last_old.time_s if last_old else fault_s),
        "client_errors": dict(client.errors),
    }
    if kill:
        times["registration_gone_s"] = timeline.require("registration_gone") - fault_s
    return times


def _restart(cluster: BenchCluster, broker_id: int, topic: str, partitions: int) -> None:
    """Back in service and in every ISR, so the next phase starts from a full cluster."""
    cluster.brokers[broker_id].start()
    for partition in range(partitions):
        cluster.wait_full_isr(topic, partition)


def sigkill_failover(
    cluster: BenchCluster, topic: str, partitions: int, settings: BenchSettings
) -> dict[str, Any]:
    times = _timed_failover(cluster, topic, partitions, settings, kill=True)
    gone = times["registration_gone_s"]
    written = times["new_leader_written_s"]
    accepted = times["new_leader_first_write_s"]
    times["phases_s"] = {
        "session_expiry": gone,
        "controller_reaction": written - gone,
        "promotion_and_first_write": accepted - written,
        "client_refresh": times["client_first_ack_s"] - accepted,
    }
    _restart(cluster, times["old_leader"], topic, partitions)
    return times


def graceful_failover(
    cluster: BenchCluster, topic: str, partitions: int, settings: BenchSettings
) -> dict[str, Any]:
    times = _timed_failover(cluster, topic, partitions, settings, kill=False)
    written = times["new_leader_written_s"]
    accepted = times["new_leader_first_write_s"]
    times["phases_s"] = {
        "controller_reaction": written,
        "promotion_and_first_write": accepted - written,
        "client_refresh": times["client_first_ack_s"] - accepted,
    }
    _restart(cluster, times["old_leader"], topic, partitions)
    return times
