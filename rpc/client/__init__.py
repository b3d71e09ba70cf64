"""The Python client of twinlog: ``Producer``, ``Consumer``, ``Admin``.

Each takes a target: a server address (``"127.0.0.1:7070"``) or an embedded
``twinlog.Broker`` (same API, no network). Errors are the engine's own classes
(``twinlog.engine.base.errors``), whichever the target.

It stands on ``rpc.wire`` (the broker API as a Protocol, conversions, the error table that
turns a server's answer back into its class) and ``rpc.generated`` (the gRPC stubs), and
on the engine's plain values: its errors, the record batch format, group values and the
coordinator partition an id carries. The Spark connector and ``rpc.cli`` use it (and
``import twinlog`` re-exports its everyday names). It never imports the server.
"""

from twinlog.engine.base.types import TopicPartition
from twinlog.rpc.client.admin import Admin
from twinlog.rpc.client.connection import DEFAULT_SERVER, ConnectionOptions, connect
from twinlog.rpc.client.consumer import Consumer
from twinlog.rpc.client.producer import Producer
from twinlog.rpc.client.rebalance_listener import ConsumerGroupMetadata, ConsumerRebalanceListener
from twinlog.rpc.client.records import ConsumerRecord, RecordMetadata
from twinlog.rpc.client.retry import RetryPolicy
from twinlog.rpc.policy.acl_bindings import AclEntry

__all__ = [
    "DEFAULT_SERVER",
    "AclEntry",
    "Admin",
    "ConnectionOptions",
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "Producer",
    "RecordMetadata",
    "RetryPolicy",
    "TopicPartition",
    "connect",
]
