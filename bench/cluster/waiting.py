"""Bounded waits: every wait of the benchmark names what it waits for and gives up."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class BenchTimeoutError(RuntimeError):
    """A phase did not reach its condition in time: the machine is too busy or a broker
    misbehaves; the message says which."""


def wait_for(
    what: str, probe: Callable[[], T | None], timeout_s: float, interval_s: float = 0.05
) -> T:
    """The first truthy value of ``probe()``, polled every ``interval_s`` for ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() >= deadline:
            raise BenchTimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(interval_s)
