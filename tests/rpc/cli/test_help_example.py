"""``twinlog --help``'s example works on a fresh server as printed: its lines after the
demo and the server's start run in a shell, each ``twinlog`` reaching a real server on a
free port (the printed lines use the default one)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from server_process import ROOT, ServerProcess, environment, run_cli

from twinlog.rpc.cli.main import EXAMPLE

pytestmark = pytest.mark.slow  # a server and a CLI process per line


def test_the_help_example_runs_on_a_fresh_server(tmp_path: Path) -> None:
    assert textwrap.indent(EXAMPLE, "  ") in run_cli("--help").stdout
    lines = EXAMPLE.splitlines()
    assert lines[0] == "twinlog demo" and lines[1].startswith("twinlog serve ")
    with ServerProcess(tmp_path / "data") as server:
        # The shell's `twinlog` is this checkout's CLI, told the test server's address.
        script = (
            f'twinlog() {{ "{sys.executable}" -m twinlog.rpc.cli "$@" --server {server.address}; }}\n'
            "set -e -o pipefail\n" + "\n".join(lines[2:]) + "\n"
        )
        result = subprocess.run(
            ["bash", "-c", script],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=environment(),
            timeout=120,
        )
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.split()[-5:]) == ["1", "2", "3", "4", "5"], result.stdout
