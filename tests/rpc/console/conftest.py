"""Tests of ``twinlog.rpc.console``: its view-models against a real broker behind a real
gRPC server, and its pages in headless Chromium against a real ``twinlog serve``."""
