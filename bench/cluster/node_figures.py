"""The figures taken on one server, single node or cluster leader alike: plain throughput
and produce latency; transactional throughput and commit latency. Each on its own topic
of one partition (on a cluster: replication factor 3, acks=all, the client talking to
the partition's leader, which is then also the transactions' coordinator)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from bench.cluster.latency import produce_latency
from bench.cluster.settings import BenchSettings
from bench.cluster.throughput import plain_throughput, transactional_throughput

PLAIN_TOPIC = "bench-plain"
TRANSACTIONAL_TOPIC = "bench-txn"
LATENCY_TOPIC = "bench-latency"

# topic -> the address of the server to send it to (creating the topic if need be)
AddressOf = Callable[[str], str]
Announce = Callable[[str], None]


def measure_plain(
    address_of: AddressOf, settings: BenchSettings, announce: Announce
) -> dict[str, Any]:
    announce("plain throughput")
    plain = plain_throughput(address_of(PLAIN_TOPIC), PLAIN_TOPIC, settings)
    announce("produce latency")
    latency = produce_latency(address_of(LATENCY_TOPIC), LATENCY_TOPIC, settings)
    return {"plain": plain, "latency": latency}


def measure_transactional(
    address_of: AddressOf, settings: BenchSettings, announce: Announce
) -> dict[str, Any]:
    announce("transactional throughput and commit latency")
    return transactional_throughput(
        address_of(TRANSACTIONAL_TOPIC),
        TRANSACTIONAL_TOPIC,
        settings,
        transactional_id=f"bench-{uuid.uuid4().hex[:8]}",
    )
