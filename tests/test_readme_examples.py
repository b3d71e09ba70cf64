"""The README's Python examples run as pasted (addresses and paths pointed at the test's own).

A reader pastes them; if one breaks, this fails. The Spark example runs against a
real server with a real local SparkSession, in its own interpreter, as a reader's would.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from server_process import ROOT, ServerProcess, environment
from spark_support import server  # noqa: F401  (the session's server fixture)

README = ROOT / "README.md"
SPARK_DOC = ROOT / "docs" / "spark.md"
PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def example(containing: str, page: Path = README) -> str:
    blocks = [b for b in PYTHON_BLOCK.findall(page.read_text()) if containing in b]
    assert len(blocks) == 1, f"expected one python block with {containing!r} in {page.name}"
    return blocks[0]


def run_example(code: str, timeout_s: float) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_embedded_example_prints_the_committed_records(tmp_path: Path) -> None:
    code = example("Broker.open(").replace('"/tmp/embedded"', repr(str(tmp_path / "embedded")))
    printed = run_example(code, timeout_s=60)
    assert "b'paid'" in printed and "b'shipped'" in printed, printed


@pytest.mark.spark
@pytest.mark.slow
def test_spark_examples_write_every_order_once_then_batch_and_stream_write_both(
    server: ServerProcess,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The README's Spark example, then docs/spark.md's, pasted one after the other into
    one interpreter (as into one notebook: the second's getOrCreate() finds the first's
    session, which spares CI a Spark start)."""
    readme = example("register(spark)").replace('"127.0.0.1:7070"', repr(server.address))
    guide = (
        example("readStream", SPARK_DOC)
        .replace('"127.0.0.1:7070"', repr(server.address))
        # Topics of its own (the README example's are on the same server) and a fresh checkpoint.
        .replace('"orders', '"spark-doc-orders')
        .replace('"/tmp/orders-enriched-checkpoint"', repr(str(tmp_path / "checkpoint")))
    )
    printed = run_example(readme + "\n" + guide, timeout_s=420)
    assert printed.strip().splitlines()[-2:] == ["1000", "2000"], printed
