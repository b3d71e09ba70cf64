"""``twinlog demo --serve`` leaves its broker running with what the console shows (a group
with lag, a transaction left open), prints the console's command, and stops on Ctrl-C."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from server_process import ROOT, environment

from twinlog.rpc.client import Admin
from twinlog.rpc.client.connection_options import ConnectionOptions

pytestmark = pytest.mark.slow  # the whole demo (its zombie waits out a timeout) first

COMMAND = re.compile(r"twinlog console --server (\S+) --token-file (\S+)")


def test_the_demo_keeps_serving_until_ctrl_c(tmp_path: Path) -> None:
    log_path = tmp_path / "demo.log"
    with log_path.open("wb") as log_file:
        demo = subprocess.Popen(
            [sys.executable, "-m", "twinlog.rpc.cli", "demo", "--serve",
             "--data-dir", str(tmp_path / "data")],
            stdout=log_file, stderr=subprocess.STDOUT, cwd=ROOT, env=environment(),
        )  # fmt: skip
    try:
        deadline_s = time.monotonic() + 90
        found = None
        while found is None and time.monotonic() < deadline_s and demo.poll() is None:
            found = COMMAND.search(log_path.read_text())
            time.sleep(0.2)
        assert found is not None, log_path.read_text()
        address, token_file = found.groups()
        metrics = re.search(r"--metrics (http://\S+) --metrics-token-file", log_path.read_text())
        assert metrics is not None, log_path.read_text()  # sizes for the console, behind the token
        token = Path(token_file).read_text().strip()
        with Admin(address, connection=ConnectionOptions(token=token)) as admin:
            [group] = admin.list_groups()
            assert sum(row.lag or 0 for row in admin.group_offsets(group.group_id)) == 2 * 3
            [transaction] = admin.list_transactions()
            assert transaction.transactional_id == "payments-open"
        with pytest.raises(Exception, match="token"):  # no token: refused
            with Admin(address, default_api_timeout_ms=3_000) as stranger:
                stranger.list_topics()
        demo.send_signal(signal.SIGINT)
        assert demo.wait(timeout=15) == 0, log_path.read_text()
        assert "stopping the broker" in log_path.read_text()
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
