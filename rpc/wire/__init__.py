"""What the client and the server share: the broker API as a Protocol, engine values to
protobuf and back, the one table between engine errors and gRPC status codes, and the
request metadata keys.
"""
