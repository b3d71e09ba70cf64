"""Kafka's binary protocol in front of the broker (``twinlog serve --kafka-listener``).

Unmodified Kafka clients (kafka-python, librdkafka, ...) produce to and consume from the
same broker object the gRPC server serves. Messages are decoded and encoded by
kafka-python's ``kafka.protocol``, whose classes are generated from Kafka's published
JSON schemas: nothing here types a schema by hand. ``docs/kafka-protocol.md`` lists
the API keys and versions served and the errors a client gets for the rest.

It uses ``rpc.server``'s authentication, ACLs and audit (and its metadata and coordinator
sources) for its own door, and the one error table of ``rpc.wire`` for its error codes.
Only ``rpc.cli`` starts it (``twinlog serve --kafka-listener``).
"""
