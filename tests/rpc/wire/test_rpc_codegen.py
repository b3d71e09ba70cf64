"""The checked-in generated code matches rpc/proto (run `make proto` when this fails)."""

from __future__ import annotations

from pathlib import Path

from twinlog.rpc.codegen import GENERATED_ROOT, generate


def test_generated_code_is_up_to_date(tmp_path: Path) -> None:
    fresh = {path.relative_to(tmp_path): path.read_text() for path in generate(tmp_path)}
    checked_in = {
        path.relative_to(GENERATED_ROOT): path.read_text()
        for path in GENERATED_ROOT.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    stale = sorted(str(name) for name in fresh if checked_in.get(name) != fresh[name])
    extra = sorted(str(name) for name in checked_in if name not in fresh)
    assert not stale and not extra, (
        f"rpc/generated is stale: {stale} differ, {extra} have no .proto; run `make proto`"
    )


def test_generated_code_imports_with_installed_runtime() -> None:
    from twinlog.rpc.generated.twinlog.v1 import (  # noqa: F401
        admin_pb2_grpc,
        consume_pb2_grpc,
        produce_pb2_grpc,
    )
