"""The ``servers`` option as a cluster's bootstrap list: several addresses dial a client that
follows each partition's leader, one address dials that one server as before; reads and
writes through a cluster client see the same data as through the server itself."""

from __future__ import annotations

from rpc_fakes import fake_server

from twinlog.connectors.spark.broker import connect
from twinlog.connectors.spark.options import Connection
from twinlog.engine.records.batch_builder import build_batch
from twinlog.rpc.client.cluster import ClusterBroker
from twinlog.rpc.client.connection_options import ConnectionOptions
from twinlog.rpc.client.remote import RemoteBroker


def test_several_servers_are_a_bootstrap_list() -> None:
    options = ConnectionOptions()
    one = connect(Connection("127.0.0.1:7070", None, options))
    many = connect(Connection(" 127.0.0.1:7070, 127.0.0.1:7071 ", None, options))
    try:
        assert isinstance(one, RemoteBroker) and isinstance(many, ClusterBroker)
        assert many.metadata.bootstrap == ["127.0.0.1:7070", "127.0.0.1:7071"]
    finally:
        one.close()
        many.close()


def test_a_bootstrap_list_with_one_live_server_reaches_it() -> None:
    with fake_server() as (broker, address):
        broker.create_topic("t", 1)
        dead = "127.0.0.1:1"  # nothing listens on port 1
        client = connect(Connection(f"{dead},{address}", None, ConnectionOptions()))
        try:
            client.produce("t", 0, build_batch([b"v"]))
            assert client.list_offset("t", 0, "latest") == 1
        finally:
            client.close()
