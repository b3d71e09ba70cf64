"""What every test folder shares.

The folders mirror the package's floors: ``tests/engine/log`` tests
``twinlog.engine.log``, ``tests/rpc/server`` tests ``twinlog.rpc.server``, and so
on (``tests/test_floors.py`` checks that each names a real floor). ``tests/system``
runs whole processes and kills them; ``tests/support`` holds helpers that several
folders import (it is on the path through pytest's ``pythonpath`` setting).

Markers (``--strict-markers``): ``slow`` is left out of the fast lane
(``pytest -m "not slow"``, under a minute); ``crash`` kills a real process with
SIGKILL; ``spark`` needs PySpark and Java. Every ``crash`` test and every test in
``tests/system`` counts as ``slow`` too (marked below, at collection).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from twinlog.engine.base import failpoints

# The SparkSession and the server the Spark tests share: session-scoped, and started
# only when a test first asks for them.
pytest_plugins = ["spark_support"]


SYSTEM_TESTS = Path(__file__).resolve().parent / "system"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("crash") or item.path.is_relative_to(SYSTEM_TESTS):
            item.add_marker(pytest.mark.slow)


@pytest.fixture()
def disarmed() -> Iterator[None]:
    """Disarms every failpoint before and after the test, whatever happened."""
    failpoints.disarm_all()
    try:
        yield
    finally:
        failpoints.disarm_all()
