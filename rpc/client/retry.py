"""Retrying retriable errors with exponential backoff, inside a time budget.

Only calls that are safe to repeat go through here: reads, idempotent produces
(the broker drops a repeated sequence), and transaction calls that the broker
answers idempotently (a retried begin with its request id, a retried commit).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from twinlog.engine.base.errors import TwinlogError

log = logging.getLogger("twinlog.client")

Result = TypeVar("Result")


@dataclass(frozen=True)
class RetryPolicy:
    timeout_ms: int = 30_000  # give up (raise the last error) after this long
    backoff_ms: int = 50  # first pause; doubles each attempt
    backoff_max_ms: int = 1_000

    def pause_ms(self, attempt: int) -> float:
        """Pause before retry number ``attempt`` (1-based), with +-20% jitter."""
        base = min(self.backoff_max_ms, self.backoff_ms * (2 ** (attempt - 1)))
        return base * random.uniform(0.8, 1.2)


def call_with_retry(
    policy: RetryPolicy,
    call: Callable[[], Result],
    what: str,
    sleep: Callable[[float], None] = time.sleep,
) -> Result:
    deadline = time.monotonic() + policy.timeout_ms / 1000
    attempt = 0
    while True:
        try:
            return call()
        except TwinlogError as error:
            if not error.retriable:
                raise
            attempt += 1
            pause_s = policy.pause_ms(attempt) / 1000
            if time.monotonic() + pause_s > deadline:
                raise
            log.debug(
                "%s: %s (%s); retry %d in %.0f ms",
                what,
                type(error).__name__,
                error,
                attempt,
                pause_s * 1000,
            )
            sleep(pause_s)
