"""What the client and the server share: the broker API as a Protocol, engine values to
protobuf and back, the one error table, and the request metadata keys.

The error table (``error_table``) is the only one: a row per engine error class with the
gRPC status it travels as and the Kafka code the Kafka listener answers with
(docs/errors.md shows it).

It stands on ``rpc.generated`` (the protobuf messages) and the engine's plain values. The
client, the server, the inter-broker services (``rpc.replication``), the Kafka listener,
the Spark connector and ``rpc.cli`` use it.
"""
