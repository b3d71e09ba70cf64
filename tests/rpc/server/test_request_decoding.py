"""The server's request deserializer: oversized and unparsable requests become typed answers."""

from __future__ import annotations

from twinlog.engine.base.errors import BatchTooLargeError, InvalidConfigError
from twinlog.rpc.generated.twinlog.v1 import produce_pb2
from twinlog.rpc.server.decode import OversizedRequest, UndecodableRequest, tolerant_deserializer

METHOD = "/twinlog.v1.Producing/ProduceStream"


def _deserializer(limit_bytes: int):  # type: ignore[no-untyped-def]
    return tolerant_deserializer(produce_pb2.ProduceRequest.FromString, METHOD, limit_bytes)


def test_an_oversized_stream_request_keeps_its_correlation_id() -> None:
    # A stream's answers are matched to requests by correlation id: the refusal of an
    # oversized request must name the request it refuses (it used to say 0).
    request = produce_pb2.ProduceRequest(topic="known", batch=b"\xcb" * 4096, correlation_id=3201)
    decoded = _deserializer(1024)(request.SerializeToString())
    assert isinstance(decoded, OversizedRequest)
    assert decoded.correlation_id == 3201
    error = decoded.error()
    assert isinstance(error, BatchTooLargeError) and "request_bytes_max=1024" in str(error)


def test_bytes_that_do_not_parse_answer_with_correlation_id_zero() -> None:
    garbage = b"\xff" * 2048  # not a protobuf message
    for limit_bytes in (1024, 1 << 20):  # oversized, and within the limit
        decoded = _deserializer(limit_bytes)(garbage)
        assert isinstance(decoded, UndecodableRequest) and decoded.correlation_id == 0
    assert isinstance(_deserializer(1 << 20)(garbage).error(), InvalidConfigError)


def test_a_request_within_the_limit_parses_as_itself() -> None:
    request = produce_pb2.ProduceRequest(topic="known", batch=b"x", correlation_id=7)
    decoded = _deserializer(1 << 20)(request.SerializeToString())
    assert decoded == request
