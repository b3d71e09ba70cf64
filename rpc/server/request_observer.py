"""Every RPC, counted and timed: the request metrics and the request log (a server interceptor).

One line per RPC on logger ``twinlog.request`` (``structured_log``)::

    request method=/twinlog.v1.Producing/Produce principal=alice peer=ipv4:127.0.0.1:50312
        status=OK duration_ms=3.2 bytes_in=1830 bytes_out=0

at DEBUG, or at INFO when a unary call took ``request_log_slow_ms`` or longer (a
stream is long by nature: its line is always DEBUG). ``bytes_in`` counts record
batch bytes produced, ``bytes_out`` record bytes fetched. The principal is worked
out only when the line is written, and a caller that fails authentication shows
as ``-`` (the audit log has the failure).

It is the outermost interceptor, so it sees what the client sees: the status a
``DecodeGuard`` or a servicer's abort set, UNKNOWN for an exception that escaped,
CANCELLED for a stream the client left.

Thread rule: stateless but for the metrics (thread-safe); every worker thread.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc

from twinlog.rpc.generated.twinlog.v1 import consume_pb2, produce_pb2
from twinlog.rpc.policy.auth import Guard
from twinlog.rpc.policy.structured_log import log_event
from twinlog.rpc.server.call import identify
from twinlog.rpc.server.metrics import ServerMetrics

REQUEST_LOGGER = "twinlog.request"
request_log = logging.getLogger(REQUEST_LOGGER)


def bytes_in_of(request: object) -> int:
    """A produce request's size on the wire: ``ByteSize()`` reads no field (each access
    to ``batch`` would copy its bytes)."""
    return request.ByteSize() if isinstance(request, produce_pb2.ProduceRequest) else 0


def bytes_out_of(response: object) -> int:
    """A fetch response's size on the wire (as ``bytes_in_of``)."""
    return response.ByteSize() if isinstance(response, consume_pb2.FetchResponse) else 0


class _Call:
    """One RPC's figures while it runs."""

    __slots__ = ("bytes_in", "bytes_out", "method", "started_s", "streaming")

    def __init__(self, method: str, streaming: bool) -> None:
        self.method = method
        self.streaming = streaming
        self.started_s = time.monotonic()
        self.bytes_in = 0
        self.bytes_out = 0


class RequestObserver(grpc.ServerInterceptor):
    def __init__(self, metrics: ServerMetrics, guard: Guard, slow_ms: int) -> None:
        self.metrics = metrics
        self.guard = guard
        self.slow_ms = slow_ms

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        if handler is None or not hasattr(handler, "_replace"):
            return handler
        method = str(handler_call_details.method)
        if handler.unary_unary is not None:
            return handler._replace(unary_unary=self._unary(handler.unary_unary, method))
        if handler.unary_stream is not None:
            return handler._replace(unary_stream=self._streaming(handler.unary_stream, method))
        if handler.stream_unary is not None:
            return handler._replace(stream_unary=self._unary(handler.stream_unary, method))
        return handler._replace(stream_stream=self._streaming(handler.stream_stream, method))

    # --- wrappers -----------------------------------------------------------------------

    def _unary(self, behavior: Callable[..., Any], method: str) -> Callable[..., Any]:
        def observed(request: Any, context: grpc.ServicerContext) -> Any:
            call = _Call(method, streaming=not _is_message(request))
            request = self._counted_in(call, request)
            failed: BaseException | None = None
            try:
                response = behavior(request, context)
                self._count_out(call, response)
                return response
            except BaseException as error:
                failed = error
                raise
            finally:
                self._finish(call, context, failed)

        return observed

    def _streaming(self, behavior: Callable[..., Any], method: str) -> Callable[..., Any]:
        def observed(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            call = _Call(method, streaming=True)
            request = self._counted_in(call, request)
            failed: BaseException | None = None
            try:
                for response in behavior(request, context):
                    self._count_out(call, response)
                    yield response
            except BaseException as error:
                failed = error
                raise
            finally:
                self._finish(call, context, failed)

        return observed

    # --- counting -----------------------------------------------------------------------

    def _counted_in(self, call: _Call, request: Any) -> Any:
        if _is_message(request):
            self._count_in(call, request)
            return request
        return self._count_each(call, request)  # a request stream

    def _count_each(self, call: _Call, requests: Iterator[Any]) -> Iterator[Any]:
        for request in requests:
            self._count_in(call, request)
            yield request

    def _count_in(self, call: _Call, request: object) -> None:
        size_bytes = bytes_in_of(request)
        call.bytes_in += size_bytes
        self.metrics.received(call.method, size_bytes)

    def _count_out(self, call: _Call, response: object) -> None:
        size_bytes = bytes_out_of(response)
        call.bytes_out += size_bytes
        self.metrics.sent(call.method, size_bytes)

    def _finish(
        self, call: _Call, context: grpc.ServicerContext, failed: BaseException | None
    ) -> None:
        duration_s = time.monotonic() - call.started_s
        code = status_of(context, failed)
        self.metrics.observe(call.method, code, duration_s)
        duration_ms = duration_s * 1000
        slow = not call.streaming and duration_ms >= self.slow_ms
        level = logging.INFO if slow else logging.DEBUG
        if not request_log.isEnabledFor(level):
            return
        log_event(
            request_log,
            level,
            "request",
            method=call.method,
            principal=self._principal_name(context),
            peer=context.peer(),
            status=code,
            duration_ms=round(duration_ms, 1),
            bytes_in=call.bytes_in,
            bytes_out=call.bytes_out,
            **({"slow": "true"} if slow else {}),
        )

    def _principal_name(self, context: grpc.ServicerContext) -> str:
        try:
            return identify(self.guard, context).name
        except Exception:  # not authenticated: the audit log says why
            return "-"


def _is_message(request: object) -> bool:
    """A request message (or a DecodeGuard stand-in), as opposed to a request stream."""
    return not hasattr(request, "__next__")


def status_of(context: grpc.ServicerContext, failed: BaseException | None) -> str:
    """The status code name the client gets."""
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return code.name
    if failed is None:
        return "OK"
    if isinstance(failed, GeneratorExit):
        return "CANCELLED"  # the client went away while the stream was open
    return "UNKNOWN"
