"""A transactional producer adds the partitions of its first batches to the transaction
in one request: one ADD_PARTITIONS record (one journal sync) instead of one per partition,
unless its coordinator leads them all (a single node served over gRPC): then each first
batch adds its own partition, and the request is saved."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from twinlog.engine.base.errors import (
    BrokerUnavailableError,
    ClusterAuthorizationError,
    TransactionDataMissingError,
)
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.broker import Broker
from twinlog.journal.txn_records import AddPartitions
from twinlog.rpc.client import Admin, Consumer, Producer
from twinlog.rpc.client.remote import RemoteBroker
from twinlog.rpc.server.config import ServerConfig
from twinlog.rpc.server.server import RpcServer


def _add_partitions_records(broker: Broker, producer_id: int) -> list[AddPartitions]:
    coordinator = broker.coordinator_manager.for_id(producer_id)
    return [
        record for _, record in coordinator.journal.replay(0) if isinstance(record, AddPartitions)
    ]


def _two_transactions_over_four_partitions(producer: Producer) -> None:
    """Two transactions of 4 batches flushed together (one per partition of "orders"),
    then a fifth record to partition 0 (already in the transaction), committed."""
    for round_number in range(2):
        producer.begin_transaction()
        for partition in range(4):
            producer.send("orders", b"r%d-p%d" % (round_number, partition), partition=partition)
        producer.flush()  # the four batches drain together
        producer.send("orders", b"later", partition=0)  # already added: no record
        producer.commit_transaction()


def test_four_partitions_flushed_together_are_added_in_one_record(tmp_path: Path) -> None:
    with Broker.open(tmp_path / "data") as broker:
        with Admin(broker) as admin:
            admin.create_topic("orders", 4)
        with Producer(broker, transactional_id="declared", linger_ms=60_000) as producer:
            identity = producer.init_transactions()
            _two_transactions_over_four_partitions(producer)
        records = _add_partitions_records(broker, identity.producer_id)
        assert [len(record.partitions) for record in records] == [4, 4]
        assert all(not record.by_send for record in records)
        with Consumer(broker, isolation_level="read_committed") as consumer:
            consumer.assign([("orders", p) for p in range(4)])
            consumer.seek_to_beginning()
            values = []
            for _ in range(50):
                values.extend(record.value for record in consumer.poll(100))
                if len(values) >= 10:
                    break
        assert len(values) == 10


def test_a_single_node_served_over_grpc_is_not_asked_to_add_them_first(tmp_path: Path) -> None:
    with Broker.open(tmp_path / "data") as broker:
        with Admin(broker) as admin:
            admin.create_topic("orders", 4)
        server = RpcServer(broker, ServerConfig(port=0))
        server.start()
        try:
            remote = RemoteBroker(f"127.0.0.1:{server.port}")
            asked: list[str] = []
            cluster_metadata = remote.cluster_metadata

            def counting_metadata(*args: Any, **kwargs: Any) -> Any:
                asked.append("metadata")
                return cluster_metadata(*args, **kwargs)

            remote.cluster_metadata = counting_metadata  # type: ignore[method-assign]
            add_partitions = remote.add_partitions_to_transaction

            def counting_add(*args: Any, **kwargs: Any) -> None:
                asked.append("add_partitions")
                add_partitions(*args, **kwargs)

            remote.add_partitions_to_transaction = counting_add  # type: ignore[method-assign]
            with remote, Producer(remote, transactional_id="served", linger_ms=60_000) as producer:
                identity = producer.init_transactions()
                _two_transactions_over_four_partitions(producer)
        finally:
            server.stop(grace_ms=0)
        records = _add_partitions_records(broker, identity.producer_id)
        # Each partition's first batch added it: 4 records of one partition per transaction.
        assert sorted((len(r.partitions), r.by_send) for r in records) == [(1, 1)] * 8
        assert asked == ["metadata"]  # whether the server is a single node: asked once


def test_a_single_new_partition_still_adds_itself_on_its_first_batch(tmp_path: Path) -> None:
    with Broker.open(tmp_path / "data") as broker:
        with Admin(broker) as admin:
            admin.create_topic("orders", 2)
        with Producer(broker, transactional_id="single") as producer:
            identity = producer.init_transactions()
            with producer.transaction():
                producer.send("orders", b"one", partition=1).result(timeout=10)
        records = _add_partitions_records(broker, identity.producer_id)
        assert [(len(r.partitions), r.by_send) for r in records] == [(1, 1)]


def test_a_commit_names_the_batches_written_and_a_lost_one_aborts_it(tmp_path: Path) -> None:
    """Partitions added ahead of their batches are not known to the coordinator to hold
    data, so the producer's commit names the batches it saw written: a journal that lost
    one refuses the commit (TransactionDataMissingError) instead of committing less."""
    with Broker.open(tmp_path / "data") as broker:
        with Admin(broker) as admin:
            admin.create_topic("orders", 2)
        named: list[dict[TopicPartition, int] | None] = []
        commit = broker.commit_transaction

        def spying_commit(*args: Any, **kwargs: Any) -> None:
            named.append(kwargs.get("batches_written"))
            commit(*args, **kwargs)

        broker.commit_transaction = spying_commit  # type: ignore[method-assign]
        with Producer(broker, transactional_id="counted", linger_ms=60_000) as producer:
            producer.init_transactions()
            producer.begin_transaction()
            for partition in range(2):
                producer.send("orders", b"first-%d" % partition, partition=partition)
            producer.flush()  # one batch each, added together: explicitly
            producer.send("orders", b"second-0", partition=0)
            producer.commit_transaction()
            assert named == [{TopicPartition("orders", 0): 2, TopicPartition("orders", 1): 1}]

            producer.begin_transaction()
            for partition in range(2):
                producer.send("orders", b"lost-%d" % partition, partition=partition)
            producer.flush()
            # Partition 1's journal drops the transaction's entries behind the coordinator's
            # back (what a damaged journal, or an abort applied by a deposed coordinator,
            # leaves): it now counts none.
            lost = producer._transactions.transaction_id
            broker.partition(TopicPartition("orders", 1)).apply_abort(lost)
            with pytest.raises(TransactionDataMissingError, match="orders-1"):
                producer.commit_transaction()
            producer.abort_transaction()
        with Consumer(broker) as consumer:
            consumer.assign([("orders", 0), ("orders", 1)])
            consumer.seek_to_beginning()
            values: list[bytes | None] = []
            for _ in range(20):
                values.extend(record.value for record in consumer.poll(100))
        assert sorted(v for v in values if v is not None) == [b"first-0", b"first-1", b"second-0"]


def test_a_server_that_refuses_to_say_is_asked_once_a_busy_one_again() -> None:
    """``RemoteBroker.coordinator_leads``: "cannot tell" after a refusal that will not
    pass (an ACL's) is kept, so later flushes send no Metadata call; after a retriable
    error the next flush asks again."""
    asked: list[str] = []

    def refusing(*args: Any, **kwargs: Any) -> Any:
        asked.append("metadata")
        raise error

    orders = [TopicPartition("orders", 0), TopicPartition("orders", 1)]
    for error, calls in (
        (ClusterAuthorizationError("no DESCRIBE on the cluster"), 1),
        (BrokerUnavailableError("not answering yet"), 3),
    ):
        asked.clear()
        with RemoteBroker("127.0.0.1:1") as remote:
            remote.cluster_metadata = refusing  # type: ignore[method-assign]
            assert [remote.coordinator_leads(7, orders) for _ in range(3)] == [False] * 3
        assert asked == ["metadata"] * calls, error
