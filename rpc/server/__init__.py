"""The gRPC server over an engine ``Broker``: services, authentication, ACLs, limits."""
