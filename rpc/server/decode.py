"""Request bytes that are not the method's protobuf message get INVALID_ARGUMENT, not INTERNAL.

gRPC's own server answers a request it cannot deserialize with INTERNAL
("Exception deserializing request!") and no twinlog metadata. This interceptor
gives every method a deserializer that never raises: bytes that do not parse
(truncated, invalid UTF-8 in a string field, a bad wire type) become an
``UndecodableRequest``, which a unary method answers with InvalidConfigError
(INVALID_ARGUMENT and the usual trailing metadata, after authentication), and
which ``ProduceStream`` answers as one failed item of the stream (the stream goes on).

The same deserializer enforces ``request_bytes_max``: gRPC's own limit is set a
little higher (``twinlog.rpc.server.server.REQUEST_BYTES_MARGIN``), so that a request just over
the limit becomes an ``OversizedRequest``, answered with BatchTooLargeError naming
the server config key, rather than gRPC's bare RESOURCE_EXHAUSTED (which only a
request over the margin still gets; the client maps it with the same advice).

Thread rule: stateless; every server worker thread uses it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

from twinlog.engine.base.errors import BatchTooLargeError, InvalidConfigError, TwinlogError
from twinlog.rpc.policy.auth import Guard
from twinlog.rpc.server.call import abort_with, principal_of
from twinlog.rpc.server.health import HEALTH_SERVICE_PREFIX
from twinlog.rpc.server.reflection import REFLECTION_SERVICE_PREFIX


class UndecodableRequest:
    """Stands in for a request whose bytes did not parse as the method's message."""

    correlation_id = 0  # a stream answers it like any request; it carried no readable id

    def __init__(self, method: str, size_bytes: int, reason: str) -> None:
        self.method = method
        self.size_bytes = size_bytes
        self.reason = reason

    def error(self) -> TwinlogError:
        return InvalidConfigError(
            f"the {self.size_bytes}-byte request to {self.method} is not a valid protobuf "
            f"message of that method's request type ({self.reason}); use the twinlog.v1 "
            "contract (rpc/proto) and a protobuf library to build requests"
        )


class OversizedRequest(UndecodableRequest):
    """Stands in for a request larger than the server's ``request_bytes_max``.

    Its correlation id is still read when the bytes parse, so that a stream's answer
    names the request it refuses (gRPC's own limit, a little above ours, bounds what
    that parse costs).
    """

    def __init__(
        self, method: str, size_bytes: int, limit_bytes: int, correlation_id: int = 0
    ) -> None:
        super().__init__(method, size_bytes, "too large")
        self.limit_bytes = limit_bytes
        self.correlation_id = correlation_id

    def error(self) -> TwinlogError:
        return BatchTooLargeError(
            f"the {self.size_bytes}-byte request to {self.method} exceeds the server's "
            f"request_bytes_max={self.limit_bytes} (server config key request_bytes_max); "
            "send less per request (smaller batches), or raise request_bytes_max on the server"
        )


def tolerant_deserializer(
    deserializer: Callable[[bytes], Any] | None, method: str, request_bytes_max: int
) -> Callable[[bytes], Any] | None:
    if deserializer is None:
        return None
    parse = deserializer

    def deserialize(data: bytes) -> Any:
        if len(data) > request_bytes_max:
            return OversizedRequest(
                method, len(data), request_bytes_max, _correlation_id_of(parse, data)
            )
        try:
            return parse(data)
        except Exception as error:
            return UndecodableRequest(method, len(data), f"{type(error).__name__}: {error}")

    return deserialize


def _correlation_id_of(parse: Callable[[bytes], Any], data: bytes) -> int:
    try:
        return int(getattr(parse(data), "correlation_id", 0))
    except Exception:  # bytes that do not parse carry no readable id
        return 0


class DecodeGuard(grpc.ServerInterceptor):
    """Swaps each handler's request deserializer for one that never raises."""

    def __init__(self, guard: Guard, request_bytes_max: int) -> None:
        self.guard = guard
        self.request_bytes_max = request_bytes_max

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        if handler is None or not hasattr(handler, "_replace"):
            return handler
        method = str(handler_call_details.method)
        if method.startswith(HEALTH_SERVICE_PREFIX):
            return handler  # probes carry no token: health checks are never authenticated
        if method.startswith(REFLECTION_SERVICE_PREFIX):
            return handler  # its own messages, checked by ReflectionDoor (rpc.server.reflection)
        deserializer = tolerant_deserializer(
            handler.request_deserializer, method, self.request_bytes_max
        )
        if handler.unary_unary is not None:
            behavior = self._checked_unary(handler.unary_unary, method)
            return handler._replace(request_deserializer=deserializer, unary_unary=behavior)
        if handler.unary_stream is not None:
            return handler  # no such method in twinlog.v1: keep gRPC's own behaviour
        # stream_unary / stream_stream: the servicer sees UndecodableRequest items itself.
        return handler._replace(request_deserializer=deserializer)

    def _checked_unary(
        self, behavior: Callable[[Any, grpc.ServicerContext], Any], method: str
    ) -> Callable[[Any, grpc.ServicerContext], Any]:
        guard = self.guard

        def checked(request: Any, context: grpc.ServicerContext) -> Any:
            if isinstance(request, UndecodableRequest):
                try:
                    principal_of(guard, context)
                    error: Exception = request.error()
                except Exception as refused:  # authentication first, as for any request
                    error = refused
                abort_with(context, method.rsplit("/", 1)[-1], error)
            return behavior(request, context)

        return checked
