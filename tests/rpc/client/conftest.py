"""Tests of ``twinlog.rpc.client``: Producer, Consumer and Admin against an embedded broker or
the in-memory fake of ``tests/support/rpc_fakes.py``."""
