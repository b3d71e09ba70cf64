"""gRPC server reflection (``grpc.reflection.v1alpha.ServerReflection``): ``grpcurl`` and
other tools list the services and call them without the .proto files.

Served on the client port, naming the public services (``twinlog.v1.Producing``,
``twinlog.v1.Consuming``, ``twinlog.v1.Administration``), the health service and
reflection itself. The internal services (Replication, Coordination: brokers only) are
not named, and the inter-broker listener serves no reflection.

    grpcurl -plaintext 127.0.0.1:7070 list
    grpcurl -H 'authorization: Bearer TOKEN' -cacert ca.pem host:7070 describe twinlog.v1.Producing

What it tells is public (rpc/proto), but it is a call like the others: on a server with a
tokens file it needs a valid bearer token, under mutual TLS a client certificate (TLS asks
for it); a caller that fails gets UNAUTHENTICATED and an ``authentication.failed`` audit
line. It needs no ACL grant. Server config key ``reflection`` (``twinlog serve
--no-reflection``: false) turns it off.

Thread rule: stateless; every server worker thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import grpc
from grpc_health.v1 import health
from grpc_reflection.v1alpha import reflection

from twinlog.engine.base.errors import AuthenticationError
from twinlog.rpc.policy.auth import Guard
from twinlog.rpc.server.call import abort_with, principal_of
from twinlog.rpc.server.health import TWINLOG_SERVICES

REFLECTION_SERVICE_PREFIX = f"/{reflection.SERVICE_NAME}/"
REFLECTED_SERVICES = (*TWINLOG_SERVICES, health.SERVICE_NAME, reflection.SERVICE_NAME)


def enable_reflection(server: grpc.Server) -> None:
    reflection.enable_server_reflection(REFLECTED_SERVICES, server)


class ReflectionDoor(grpc.ServerInterceptor):
    """Authenticates a reflection call before its stream starts, as every twinlog call is."""

    def __init__(self, guard: Guard) -> None:
        self.guard = guard

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        method = str(handler_call_details.method)
        if (
            handler is None
            or not hasattr(handler, "_replace")
            or not method.startswith(REFLECTION_SERVICE_PREFIX)
            or handler.stream_stream is None
        ):
            return handler
        return handler._replace(stream_stream=self._authenticated(handler.stream_stream))

    def _authenticated(self, behavior: Callable[..., Iterator[Any]]) -> Callable[..., Any]:
        guard = self.guard

        def checked(requests: Iterator[Any], context: grpc.ServicerContext) -> Iterator[Any]:
            try:
                principal_of(guard, context)  # a failure is audited there
            except AuthenticationError as error:
                abort_with(context, "ServerReflectionInfo", error)
            return behavior(requests, context)

        return checked
