"""docs/kafka-protocol.md's Python example runs as pasted against ``twinlog serve
--kafka-listener`` (its address pointed at the test's own)."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

from server_process import ROOT, ServerProcess, environment

from twinlog.rpc.client import Admin

DOC = ROOT / "docs" / "kafka-protocol.md"
PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.S)
KAFKA_SERVING = re.compile(r"serving Kafka clients on 127\.0\.0\.1:(\d+)")


def test_the_documented_example_runs(tmp_path: Path) -> None:
    (code,) = PYTHON_BLOCK.findall(DOC.read_text())
    with ServerProcess(tmp_path / "data", "--kafka-listener", "127.0.0.1:0") as process:
        deadline = time.monotonic() + 10
        while not (found := KAFKA_SERVING.search(process.log())):
            assert time.monotonic() < deadline, process.log()
            time.sleep(0.05)
        with Admin(process.address) as admin:
            admin.create_topic("orders", partitions=2)
        result = subprocess.run(
            [sys.executable, "-c", code.replace("127.0.0.1:9092", f"127.0.0.1:{found.group(1)}")],
            capture_output=True,
            text=True,
            timeout=60,
            env=environment(),
        )
        assert result.returncode == 0, result.stderr
        assert "b'paid'" in result.stdout
        assert process.stop() == 0
