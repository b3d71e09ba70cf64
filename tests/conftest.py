"""What every test folder shares.

The folders mirror the package's floors: ``tests/engine/log`` tests
``twinlog.engine.log``, ``tests/rpc/server`` tests ``twinlog.rpc.server``, and so
on (``tests/test_floors.py`` checks that each names a real floor). ``tests/system``
runs whole processes and kills them; ``tests/support`` holds helpers that several
folders import (it is on the path through pytest's ``pythonpath`` setting).

Markers (``--strict-markers``): ``slow`` is left out of the fast lane
(``pytest -m "not slow"``, under a minute); ``crash`` kills a real process with
SIGKILL; ``spark`` needs PySpark and Java.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from twinlog.engine.base import failpoints

# The SparkSession and the server the Spark tests share: session-scoped, and started
# only when a test first asks for them.
pytest_plugins = ["spark_support"]


@pytest.fixture()
def disarmed() -> Iterator[None]:
    """Disarms every failpoint before and after the test, whatever happened."""
    failpoints.disarm_all()
    try:
        yield
    finally:
        failpoints.disarm_all()
