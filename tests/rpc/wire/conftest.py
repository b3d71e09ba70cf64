"""Tests of ``twinlog.rpc.wire`` (and ``rpc/generated``): engine values to protobuf and back,
the error-to-status table, and that the generated code matches ``rpc/proto``."""
