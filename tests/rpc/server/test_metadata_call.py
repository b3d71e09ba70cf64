"""The Administration service's ``Metadata`` on a single-node server: itself as broker 0
at the address it listens on, leader of every partition, no cluster id; unknown topics
left out; an authenticated principal required."""

from __future__ import annotations

from pathlib import Path

import pytest
from rpc_fakes import fake_server

from twinlog.engine.base.errors import AuthenticationError
from twinlog.rpc.client.connection_options import ConnectionOptions
from twinlog.rpc.client.remote import RemoteBroker


def test_a_single_node_answers_itself_leading_every_partition() -> None:
    with fake_server() as (broker, address), RemoteBroker(address) as remote:
        broker.create_topic("orders", 3)
        broker.create_topic("audit", 1)
        everything = remote.cluster_metadata()
        assert everything.standalone and everything.controller_id == 0
        [me] = everything.brokers
        assert (me.broker_id, me.address) == (0, address)
        assert [topic.name for topic in everything.topics] == ["audit", "orders"]
        orders = everything.topic("orders")
        assert orders is not None
        assert [(p.partition, p.leader_id, p.replicas, p.isr) for p in orders.partitions] == [
            (n, 0, (0,), (0,)) for n in range(3)
        ]
        assert everything.leader("orders", 2) == me
        asked = remote.cluster_metadata(["orders", "missing"])
        assert [topic.name for topic in asked.topics] == ["orders"]
        assert asked.leader("orders", 3) is None  # no such partition


def test_metadata_needs_an_authenticated_principal(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("reader-token-0123456789 reader\n")
    with fake_server(tokens_file=str(tokens)) as (_broker, address):
        with RemoteBroker(address) as anonymous, pytest.raises(AuthenticationError):
            anonymous.cluster_metadata()
        options = ConnectionOptions(token="reader-token-0123456789")
        with RemoteBroker(address, options) as reader:
            assert reader.cluster_metadata().brokers[0].broker_id == 0
