"""Tests of ``twinlog.rpc.server``: a real ``twinlog serve`` process on loopback
(``tests/support/server_process.py``): end to end, security, limits, hostile requests,
graceful shutdown."""
