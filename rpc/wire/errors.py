"""Engine errors over gRPC, both directions.

Server side, ``describe(error)`` gives the status code (the one error table's,
``twinlog.rpc.wire.error_table``), and the trailing metadata
that names the error class, its ``retriable``, ``abortable`` and ``fatal`` flags
and its extra attributes (for example ``log_start_offset`` of
OffsetOutOfRangeError). Client side, ``error_from_status`` rebuilds the same
exception class from them, so code written against the embedded
``twinlog.Broker`` catches the same exceptions through the network. The flags
the server sent win over the class's own: a class this client does not know
arrives as a TwinlogError that still says what to do.

A status that did not come from a twinlog server (connection refused, deadline,
message too large for gRPC itself) has no metadata; ``TRANSPORT_STATUS_ERRORS``
maps those.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import grpc

from twinlog.engine.base import errors
from twinlog.engine.base.errors import TwinlogError
from twinlog.rpc.generated.twinlog.v1 import common_pb2
from twinlog.rpc.wire.error_table import ERROR_CLASSES_BY_NAME, row_of
from twinlog.rpc.wire.error_table import status_of as status_of  # for callers of this module

Code = grpc.StatusCode

# Statuses that reach a client without twinlog metadata: produced by gRPC itself.
TRANSPORT_STATUS_ERRORS: dict[grpc.StatusCode, type[TwinlogError]] = {
    Code.UNAVAILABLE: errors.BrokerUnavailableError,
    Code.DEADLINE_EXCEEDED: errors.RequestTimedOutError,
    Code.RESOURCE_EXHAUSTED: errors.BatchTooLargeError,  # gRPC's own message size limit
    Code.UNAUTHENTICATED: errors.AuthenticationError,
    Code.PERMISSION_DENIED: errors.AuthorizationError,
}

TRANSPORT_HINTS: dict[grpc.StatusCode, str] = {
    Code.UNAVAILABLE: "is the server running at that address, with matching TLS settings?",
    Code.DEADLINE_EXCEEDED: "the request may or may not have been applied; retry it",
    Code.RESOURCE_EXHAUSTED: "the request is larger than the server accepts (server config "
    "key request_bytes_max); send less per request, or raise request_bytes_max on the server",
}
# gRPC prefixes its size-limit messages with the side that refused: a request over this
# client's own limit never left the process, and the server's setting is not the cure.
CLIENT_SIZE_LIMIT_HINT = (
    "the request is larger than this client sends (twinlog.rpc.client.request_size."
    "MESSAGE_BYTES_MAX); send less per request"
)

# What gRPC's Python client says when this side cancelled the call (a deadline of ours, a
# stream we closed): only the other CANCELLED come from the server.
LOCAL_CANCEL_DETAILS = "Locally cancelled"

NAME_KEY = "twinlog-error-name"
RETRIABLE_KEY = "twinlog-error-retriable"
ABORTABLE_KEY = "twinlog-error-abortable"
FATAL_KEY = "twinlog-error-fatal"
FLAG_NAMES = ("retriable", "abortable", "fatal")
ATTRIBUTES_KEY = "twinlog-error-attributes"


def _attributes(error: TwinlogError) -> dict[str, Any]:
    """The error's extra fields that JSON can carry (message and flags excluded)."""
    found: dict[str, Any] = {}
    for key, value in vars(error).items():
        if key.startswith("_") or key in FLAG_NAMES:
            continue
        if value is None or isinstance(value, str | int | float | bool):
            found[key] = value
    return found


@dataclass(frozen=True)
class ErrorDescription:
    """Everything a client needs to rebuild an error."""

    code: grpc.StatusCode
    name: str
    message: str
    retriable: bool
    attributes_json: str
    abortable: bool = False
    fatal: bool = False

    def trailing_metadata(self) -> tuple[tuple[str, str], ...]:
        pairs = [
            (NAME_KEY, self.name),
            (RETRIABLE_KEY, _flag_text(self.retriable)),
            (ABORTABLE_KEY, _flag_text(self.abortable)),
            (FATAL_KEY, _flag_text(self.fatal)),
        ]
        if self.attributes_json:
            pairs.append((ATTRIBUTES_KEY, self.attributes_json))
        return tuple(pairs)

    def to_proto(self) -> common_pb2.Error:
        """The error of one item of a stream (the same fields as the trailing metadata)."""
        return common_pb2.Error(
            name=self.name,
            message=self.message,
            retriable=self.retriable,
            status_code=self.code.value[0],
            attributes_json=self.attributes_json,
            abortable=self.abortable,
            fatal=self.fatal,
        )


def describe(error: BaseException) -> ErrorDescription:
    """How ``error`` travels. Anything not a TwinlogError is an INTERNAL TwinlogError."""
    if not isinstance(error, TwinlogError):
        return ErrorDescription(
            Code.INTERNAL,
            TwinlogError.__name__,
            f"internal server error ({type(error).__name__}: {error}); see the server log",
            False,
            "",
        )
    row = row_of(type(error))
    attributes = _attributes(error)
    return ErrorDescription(
        row.status,
        row.error.__name__,
        str(error),
        bool(error.retriable),
        json.dumps(attributes, sort_keys=True) if attributes else "",
        bool(error.abortable),
        bool(error.fatal),
    )


def _flag_text(flag: bool) -> str:
    return "true" if flag else "false"


def _flag_of(metadata: dict[str, str], key: str) -> bool | None:
    text = metadata.get(key)
    return None if text is None else text == "true"


def rebuild(
    name: str,
    message: str,
    retriable: bool | None,
    attributes_json: str,
    abortable: bool | None = None,
    fatal: bool | None = None,
) -> TwinlogError:
    """The exception a server described: same class, message, attributes and flags.

    A flag given as None (an older server did not send it) keeps the class's value.
    """
    cls = ERROR_CLASSES_BY_NAME.get(name, TwinlogError)
    error = cls.__new__(cls)
    Exception.__init__(error, message)
    if attributes_json:
        try:
            attributes = json.loads(attributes_json)
        except ValueError:
            attributes = {}
        if isinstance(attributes, dict):
            for key, value in attributes.items():
                setattr(error, str(key), value)
    # The server's verdict wins over the class: an unknown class (from a newer server)
    # or an instance the server classified itself still says what to do.
    for flag, verdict in (("retriable", retriable), ("abortable", abortable), ("fatal", fatal)):
        if verdict is not None and verdict != getattr(cls, flag):
            setattr(error, flag, verdict)
    return error


def error_from_proto(error: common_pb2.Error) -> TwinlogError:
    """The engine exception of one item of a stream (``ErrorDescription.to_proto``)."""
    return rebuild(
        error.name,
        error.message,
        error.retriable,
        error.attributes_json,
        error.abortable if error.HasField("abortable") else None,
        error.fatal if error.HasField("fatal") else None,
    )


def _metadata_dict(metadata: Iterable[tuple[str, str | bytes]] | None) -> dict[str, str]:
    found: dict[str, str] = {}
    for key, value in metadata or ():
        found[key] = value.decode() if isinstance(value, bytes) else value
    return found


def error_from_rpc_error(error: grpc.RpcError) -> TwinlogError:
    """The engine exception a failed call stands for (gRPC errors are also grpc.Call)."""
    code: grpc.StatusCode = error.code()
    details: str = error.details() or ""
    metadata = _metadata_dict(error.trailing_metadata())
    return error_from_status(code, details, metadata)


def error_from_status(
    code: grpc.StatusCode, details: str, metadata: dict[str, str]
) -> TwinlogError:
    name = metadata.get(NAME_KEY)
    if name is not None:
        return rebuild(
            name,
            details,
            _flag_of(metadata, RETRIABLE_KEY),
            metadata.get(ATTRIBUTES_KEY, ""),
            _flag_of(metadata, ABORTABLE_KEY),
            _flag_of(metadata, FATAL_KEY),
        )
    if code is Code.CANCELLED and not details.startswith(LOCAL_CANCEL_DETAILS):
        # Cancelled by the server, not by us: a server stopping cancels the calls still
        # in flight when its grace period ends. As an unreachable broker: retriable, the
        # request's outcome unknown, and a cluster client routes the retry afresh.
        return errors.BrokerUnavailableError(
            f"CANCELLED: {details} (the server cancelled the request, as a server stopping "
            "does: it may or may not have been applied; retry it)"
        )
    cls = TRANSPORT_STATUS_ERRORS.get(code, TwinlogError)
    hint = TRANSPORT_HINTS.get(code, "")
    if code is Code.RESOURCE_EXHAUSTED and details.startswith("CLIENT:"):
        hint = CLIENT_SIZE_LIMIT_HINT
    text = f"{code.name}: {details}" + (f" ({hint})" if hint else "")
    return cls(text)
