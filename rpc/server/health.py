"""The standard gRPC health service (``grpc.health.v1.Health``), as load balancers and
Kubernetes probes expect it.

Service names: ``""`` (the server as a whole) and each twinlog service
(``twinlog.v1.Producing``, ``twinlog.v1.Consuming``, ``twinlog.v1.Administration``).
NOT_SERVING until the server starts (the broker has recovered by then: ``serve``
opens it first), SERVING while it serves, NOT_SERVING from the moment it begins to
shut down. Health checks need no token: the health service authenticates nobody
(probes carry no credentials) and tells nothing but these states.

    grpc_health_probe -addr=127.0.0.1:7070 -service=twinlog.v1.Producing

Thread rule: ``serving``/``stopping`` from the server's owning thread.
"""

from __future__ import annotations

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from twinlog.rpc.generated.twinlog.v1 import admin_pb2, consume_pb2, produce_pb2

HEALTH_SERVICE_PREFIX = "/grpc.health.v1.Health/"
TWINLOG_SERVICES = tuple(
    service.full_name
    for module in (produce_pb2, consume_pb2, admin_pb2)
    for service in module.DESCRIPTOR.services_by_name.values()
)
SERVICE_NAMES = ("", *TWINLOG_SERVICES)


class HealthReporter:
    def __init__(self, server: grpc.Server) -> None:
        self.servicer = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.servicer, server)
        self._set(health_pb2.HealthCheckResponse.NOT_SERVING)

    def serving(self) -> None:
        self._set(health_pb2.HealthCheckResponse.SERVING)

    def stopping(self) -> None:
        """NOT_SERVING for good: later ``serving`` calls change nothing."""
        self.servicer.enter_graceful_shutdown()

    def _set(self, status: int) -> None:
        for name in SERVICE_NAMES:
            self.servicer.set(name, status)
