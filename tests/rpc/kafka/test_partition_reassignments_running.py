"""ListPartitionReassignments while moves run, and AlterPartitionReassignments under an ACL
file that lets the caller alter some topics: an embedded broker whose
``partition_reassignments`` says what a cluster's would (one node never has a move
running), behind a listener whose anonymous principal may alter and read ``movable*``
topics only."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from kafka.protocol.admin import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)

from twinlog.engine.base.errors import BrokerUnavailableError
from twinlog.engine.broker.broker import Broker
from twinlog.engine.broker.reassignments import Reassignment
from twinlog.rpc.client import Admin
from twinlog.rpc.kafka.error_codes import NONE, TOPIC_AUTHORIZATION_FAILED, code_of
from twinlog.rpc.kafka.listener import KafkaListener
from twinlog.rpc.policy.auth import Acl, Guard

SHOWN, HIDDEN = "movable-orders", "hidden-payments"
ACL = """
anonymous  alter  movable*
anonymous  read   movable*
"""
RUNNING = [
    # 0 moves from [1, 2] to [3, 1]: 3 is added, 2 leaves
    Reassignment(SHOWN, 0, (3, 1, 2), (3,), (2,), (1, 2), 1, 0),
    Reassignment(SHOWN, 1, (4, 5), (4,), (5,), (5,), 5, 1 << 20),
    Reassignment(HIDDEN, 0, (1, 2), (2,), (), (1,), 1, 0),
]
Asked = AlterPartitionReassignmentsRequest.ReassignableTopic
AskedPartition = Asked.ReassignablePartition
Listed = ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics


class MovingBroker:
    """The embedded broker, telling the moves in ``running`` (an exception: raised)."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self.running: list[Reassignment] | Exception = RUNNING

    def __getattr__(self, name: str) -> Any:
        return getattr(self._broker, name)

    def partition_reassignments(self) -> list[Reassignment]:
        if isinstance(self.running, Exception):
            raise self.running
        return list(self.running)


@pytest.fixture(scope="module")
def kafka_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    """This module's listener, for the ``raw`` connections of ``conftest.py``."""
    directory = tmp_path_factory.mktemp("kafka-reassignments")
    (directory / "acl.txt").write_text(ACL)
    guard = Guard(None, Acl.load(directory / "acl.txt"), mutual_tls=False)
    broker = Broker.open(directory / "data")
    Admin(broker).create_topic(SHOWN, partitions=2)
    Admin(broker).create_topic(HIDDEN, partitions=1)
    served = MovingBroker(broker)
    listener = KafkaListener(served, "127.0.0.1", 0, guard=guard)  # type: ignore[arg-type]
    listener.start()
    try:
        yield SimpleNamespace(broker=broker, listener=listener, served=served)
    finally:
        listener.stop(grace_ms=2_000)
        broker.close()


def _list(raw: Any, topics: list[Any] | None) -> Any:
    request = ListPartitionReassignmentsRequest(timeout_ms=5_000, topics=topics)
    return raw.call(request, ListPartitionReassignmentsResponse, 0)


def _listed(answer: Any) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
    return {
        (topic.name, p.partition_index): (p.replicas, p.adding_replicas, p.removing_replicas)
        for topic in answer.topics
        for p in topic.partitions
    }


def test_running_moves_are_listed_with_adding_and_removing_replicas(raw: Any) -> None:
    everything = _list(raw, None)
    assert everything.error_code == NONE
    # The hidden topic's move is not listed: the caller may neither read nor write it
    assert _listed(everything) == {
        (SHOWN, 0): ([3, 1, 2], [3], [2]),
        (SHOWN, 1): ([4, 5], [4], [5]),
    }
    named = _list(
        raw,
        [Listed(name=SHOWN, partition_indexes=[1, 7]), Listed(name=HIDDEN, partition_indexes=[0])],
    )
    assert _listed(named) == {(SHOWN, 1): ([4, 5], [4], [5])}


def test_a_listing_the_broker_cannot_read_is_a_top_level_error(raw: Any, kafka_server: Any) -> None:
    away = BrokerUnavailableError("ZooKeeper is not reachable")
    kafka_server.served.running = away
    try:
        answer = _list(raw, None)
    finally:
        kafka_server.served.running = RUNNING
    assert answer.error_code == code_of(away) != NONE
    assert answer.error_message == "ZooKeeper is not reachable"
    assert answer.topics == []


def test_only_the_topics_the_caller_may_alter_are_moved(raw: Any) -> None:
    request = AlterPartitionReassignmentsRequest(
        timeout_ms=5_000,
        topics=[
            Asked(name=HIDDEN, partitions=[AskedPartition(partition_index=0, replicas=[0])]),
            Asked(name=SHOWN, partitions=[AskedPartition(partition_index=1, replicas=[0])]),
        ],
    )
    answer = raw.call(request, AlterPartitionReassignmentsResponse, 0)
    assert answer.error_code == NONE
    codes = {
        (topic.name, p.partition_index): p.error_code
        for topic in answer.responses
        for p in topic.partitions
    }
    assert codes == {(HIDDEN, 0): TOPIC_AUTHORIZATION_FAILED, (SHOWN, 1): NONE}
    assert [topic.name for topic in answer.responses] == [HIDDEN, SHOWN]  # as asked
