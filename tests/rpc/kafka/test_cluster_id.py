"""A single node's cluster id is its own (random, kept with the data directory), not one
constant every single node shared, so tools that key what they know by it keep two
single nodes apart, and one node keeps its id across a restart."""

from __future__ import annotations

import re
from pathlib import Path

import kafka

from twinlog.engine.broker.broker import Broker
from twinlog.rpc.kafka.listener import KafkaListener, KafkaListenerSettings

CLIENT_TIMEOUT_MS = 10_000


def _cluster_id_through_kafka(data_dir: Path) -> str:
    with Broker.open(data_dir) as broker:
        listener = KafkaListener(broker, "127.0.0.1", 0, KafkaListenerSettings())
        listener.start()
        try:
            admin = kafka.KafkaAdminClient(
                bootstrap_servers=f"127.0.0.1:{listener.port}",
                request_timeout_ms=CLIENT_TIMEOUT_MS,
            )
            try:
                described = admin.describe_cluster()
            finally:
                admin.close()
        finally:
            listener.stop(grace_ms=2_000)
        assert described["cluster_id"] == broker.cluster_id
        return str(described["cluster_id"])


def test_each_single_node_answers_its_own_cluster_id(tmp_path: Path) -> None:
    first = _cluster_id_through_kafka(tmp_path / "first")
    second = _cluster_id_through_kafka(tmp_path / "second")
    assert re.fullmatch(r"[0-9a-f]{32}", first) and re.fullmatch(r"[0-9a-f]{32}", second)
    assert first != second
    assert _cluster_id_through_kafka(tmp_path / "first") == first  # kept across a restart
