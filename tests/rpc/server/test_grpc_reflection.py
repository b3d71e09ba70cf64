"""gRPC server reflection on the client port: a grpc client lists the services and reads
their schemas through the reflection API (what grpcurl does), with a token on a server
that has a tokens file and refused without one; off with ``reflection=false``."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)
from rpc_fakes import FakeBroker

from twinlog.rpc.policy.audit import AUDIT_LOGGER
from twinlog.rpc.server.config import ServerConfig
from twinlog.rpc.server.server import RpcServer

TOKEN = "a-token-of-sixteen-characters"
PUBLIC = {
    "twinlog.v1.Producing",
    "twinlog.v1.Consuming",
    "twinlog.v1.Administration",
    "grpc.health.v1.Health",
    "grpc.reflection.v1alpha.ServerReflection",
}


class _Bearer(grpc.StreamStreamClientInterceptor):
    """Sends ``authorization: Bearer TOKEN`` on every stream (the reflection call is one)."""

    def __init__(self, token: str) -> None:
        self.metadata = (("authorization", f"Bearer {token}"),)

    def intercept_stream_stream(
        self, continuation: Callable[..., Any], details: Any, requests: Iterator[Any]
    ) -> Any:
        details = details._replace(metadata=(*(details.metadata or ()), *self.metadata))
        return continuation(details, requests)


def _served(config: ServerConfig) -> RpcServer:
    server = RpcServer(FakeBroker(), config)
    server.start()
    return server


def test_reflection_lists_the_public_services_and_their_schemas() -> None:
    server = _served(ServerConfig(port=0))
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            database = ProtoReflectionDescriptorDatabase(channel)
            assert set(database.get_services()) == PUBLIC
            produce = database.FindFileContainingSymbol("twinlog.v1.Producing")
            assert "Produce" in {method.name for method in produce.service[0].method}
    finally:
        server.stop(grace_ms=0)


def test_reflection_needs_a_token_where_every_other_call_does(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{TOKEN} alice\n")
    server = _served(ServerConfig(port=0, tokens_file=str(tokens)))
    address = f"127.0.0.1:{server.port}"
    try:
        with grpc.insecure_channel(address) as plain, caplog.at_level(logging.INFO, AUDIT_LOGGER):
            with pytest.raises(grpc.RpcError) as refused:
                ProtoReflectionDescriptorDatabase(plain).get_services()
        assert refused.value.code() is grpc.StatusCode.UNAUTHENTICATED
        assert "bearer token" in str(refused.value.details())
        audited = [r.getMessage() for r in caplog.records if r.name == AUDIT_LOGGER]
        assert any(line.startswith("authentication.failed ") for line in audited), audited
        with grpc.insecure_channel(address) as plain:
            channel = grpc.intercept_channel(plain, _Bearer("not-" + TOKEN))
            with pytest.raises(grpc.RpcError) as unknown:
                ProtoReflectionDescriptorDatabase(channel).get_services()
            assert unknown.value.code() is grpc.StatusCode.UNAUTHENTICATED
        with grpc.insecure_channel(address) as plain:
            channel = grpc.intercept_channel(plain, _Bearer(TOKEN))
            assert set(ProtoReflectionDescriptorDatabase(channel).get_services()) == PUBLIC
    finally:
        server.stop(grace_ms=0)


def test_reflection_can_be_turned_off() -> None:
    server = _served(ServerConfig(port=0, reflection=False))
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            with pytest.raises(grpc.RpcError) as absent:
                ProtoReflectionDescriptorDatabase(channel).get_services()
        assert absent.value.code() is grpc.StatusCode.UNIMPLEMENTED
    finally:
        server.stop(grace_ms=0)
