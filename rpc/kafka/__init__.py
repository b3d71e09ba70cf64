"""Kafka's binary protocol in front of the broker (``twinlog serve --kafka-listener``).

Unmodified Kafka clients (kafka-python, librdkafka, ...) produce to and consume from the
same broker object the gRPC server serves. Messages are decoded and encoded by
kafka-python's ``kafka.protocol``, whose classes are generated from Kafka's published
JSON schemas: nothing here types a schema by hand. ``docs/kafka-protocol.md`` lists
the API keys and versions served and the errors a client gets for the rest.

It asks ``rpc.policy`` who is calling and what they may do (the same guard the gRPC
server asks), ``rpc.cluster`` for the metadata and coordinator answers, and the one
error table of ``rpc.wire`` for its error codes. It imports nothing of ``rpc.server``.
Only ``rpc.cli`` starts it (``twinlog serve --kafka-listener``).
"""
