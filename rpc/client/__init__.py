"""The Python client of twinlog: ``Producer``, ``Consumer``, ``Admin``.

Each takes a target: a server address (``"127.0.0.1:7070"``) or an embedded
``engine.Broker`` (same API, no network). Errors are the engine's own classes
(``engine.errors``), whichever the target.
"""

from engine.types import TopicPartition
from rpc.client.admin import Admin
from rpc.client.connection import DEFAULT_SERVER, ConnectionOptions, connect
from rpc.client.consumer import Consumer
from rpc.client.producer import Producer
from rpc.client.records import ConsumerRecord, RecordMetadata
from rpc.client.retry import RetryPolicy

__all__ = [
    "DEFAULT_SERVER",
    "Admin",
    "ConnectionOptions",
    "Consumer",
    "ConsumerRecord",
    "Producer",
    "RecordMetadata",
    "RetryPolicy",
    "TopicPartition",
    "connect",
]
