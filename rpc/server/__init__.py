"""The gRPC server over an engine ``Broker``: services, authentication, ACLs, limits, and
what an operator watches (metrics, health, request and audit logs: docs/operations.md)."""
