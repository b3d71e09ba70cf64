"""gRPC request metadata keys that the client sends and the server reads."""

# Bearer tokens travel as ``authorization: Bearer <token>`` (RFC 6750), as with HTTP.
AUTHORIZATION_KEY = "authorization"
