"""The largest message this client sends or accepts, checked before a request is sent.

gRPC refuses an outgoing message over its send limit with a bare RESOURCE_EXHAUSTED
that reads like the server's refusal; checking first gives an error that names
this client's limit, which no server setting can raise.

A produce request is measured by its batch, not by ``ByteSize()``: the protobuf
runtime computes that by serialising the message, which would double the cost of
sending a large batch.

Thread rule: pure functions; any thread.
"""

from __future__ import annotations

from google.protobuf.message import Message

from twinlog.engine.base.errors import BatchTooLargeError

MESSAGE_BYTES_MAX = 64 * 1024 * 1024  # gRPC's send and receive limit of this client's channels
PRODUCE_FIELDS_BYTES_MAX = 1024  # a produce request's fields other than batch and topic


def check_size(size_bytes: int, what: str) -> None:
    """Raise BatchTooLargeError when a request of ``size_bytes`` is larger than this client sends."""
    if size_bytes > MESSAGE_BYTES_MAX:
        raise BatchTooLargeError(
            f"the {size_bytes}-byte {what} request is larger than this client sends "
            f"(MESSAGE_BYTES_MAX={MESSAGE_BYTES_MAX} in rpc/client/request_size.py; the "
            "server's request_bytes_max is lower by default): send less per request"
        )


def check_request_size(request: Message) -> None:
    check_size(request.ByteSize(), type(request).__name__)


def check_produce_size(topic: str, batch: bytes) -> None:
    check_size(len(batch) + len(topic) * 4 + PRODUCE_FIELDS_BYTES_MAX, "ProduceRequest")
