"""Ruff and mypy run as part of the tests, so CI enforces them with the same command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from checkout import ROOT

BIN = Path(sys.executable).parent


@pytest.mark.parametrize(
    "command",
    [
        ["ruff", "check", "."],
        ["ruff", "format", "--check", "."],
        pytest.param(["python", "tests/support/typecheck.py"], marks=pytest.mark.slow),
    ],
    ids=["ruff", "ruff-format", "mypy"],
)
def test_linters_are_clean(command: list[str]) -> None:
    executable = BIN / command[0]
    result = subprocess.run(
        [str(executable), *command[1:]], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout + result.stderr
