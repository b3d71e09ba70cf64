"""Retrying retriable errors with exponential backoff, inside a time budget.

Only calls that are safe to repeat go through here: reads, idempotent produces
(the broker drops a repeated sequence), and transaction calls that the broker
answers idempotently (a retried begin with its request id, a retried commit).

Two bounds: the policy's ``timeout_ms`` stops retrying (the last error is raised), and
a call's own ``timeout_ms`` (``default_api_timeout_ms`` or the caller's) is a hard
deadline on the whole call: each request's gRPC timeout is cut to what is left of it
(``call_deadline``), and when it passes without an answer from the server the call
raises RequestTimedOutError naming it (after an answer, that answer's error).

The pauses between attempts are ``RetryPolicy.backoff``: the one backoff policy
(``engine.base.backoff``) with the policy's numbers. The producer's resends, the
consumer's fetch backoff and a group member's heartbeats take theirs from it too
(``pause_ms``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from twinlog.engine.base.backoff import Backoff
from twinlog.engine.base.config_rules import NON_NEGATIVE, POSITIVE, ConfigRules
from twinlog.engine.base.errors import RequestTimedOutError, TwinlogError
from twinlog.rpc.client.call_deadline import NO_ANSWER_ERRORS, current_deadline_s, deadline_at

log = logging.getLogger("twinlog.client")

Result = TypeVar("Result")


@dataclass(frozen=True)
class RetryPolicy:
    timeout_ms: int = 30_000  # give up (raise the last error) after this long
    backoff_ms: int = 50  # first pause; doubles each attempt (Kafka's retry.backoff.ms)
    backoff_max_ms: int = 1_000  # the longest pause (retry.backoff.max.ms)
    # The pauses, by the one policy: backoff_ms doubling to backoff_max_ms, +-20% jitter.
    backoff: Backoff = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        RULES.check(self)
        object.__setattr__(self, "backoff", Backoff(self.backoff_ms, self.backoff_max_ms))

    def pause_ms(self, attempt: int) -> float:
        """Pause before retry number ``attempt`` (1-based): ``Backoff.delay_ms``."""
        return self.backoff.delay_ms(attempt)


RULES = ConfigRules(
    "retry policy",
    {"timeout_ms": POSITIVE, "backoff_ms": NON_NEGATIVE, "backoff_max_ms": NON_NEGATIVE},
)


def call_with_retry(
    policy: RetryPolicy,
    call: Callable[[], Result],
    what: str,
    sleep: Callable[[float], None] = time.sleep,
    timeout_ms: int | None = None,
) -> Result:
    """``call()`` until it succeeds, raises a non-retriable error, or runs out of time.

    ``timeout_ms``: the deadline of the whole call (None: only the policy's budget).
    """
    started_s = time.monotonic()
    retry_deadline_s = started_s + policy.timeout_ms / 1000
    call_deadline_s = None if timeout_ms is None else started_s + timeout_ms / 1000
    enclosing_s = current_deadline_s()  # an enclosing call's deadline bounds this one too
    if enclosing_s is not None:
        call_deadline_s = (
            enclosing_s if call_deadline_s is None else min(call_deadline_s, enclosing_s)
        )
        timeout_ms = max(1, round((call_deadline_s - started_s) * 1000))
    attempt = 0
    while True:
        try:
            if call_deadline_s is None:
                return call()
            with deadline_at(call_deadline_s):
                return call()
        except TwinlogError as error:
            if not error.retriable:
                raise
            attempt += 1
            pause_s = policy.pause_ms(attempt) / 1000
            now_s = time.monotonic()
            if call_deadline_s is not None and now_s + pause_s >= call_deadline_s:
                assert timeout_ms is not None
                if not isinstance(error, NO_ANSWER_ERRORS):
                    raise  # the server's own answer says more than "timed out"
                raise call_timed_out(what, timeout_ms, now_s - started_s, attempt, error) from error
            if now_s + pause_s > retry_deadline_s:
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


def call_timed_out(
    what: str, timeout_ms: int, elapsed_s: float, attempts: int, last: TwinlogError
) -> RequestTimedOutError:
    """The error of a call that ran out of time: which call, after how long, what to do."""
    return RequestTimedOutError(
        f"{what} did not complete within its timeout of {timeout_ms} ms "
        f"({elapsed_s * 1000:.0f} ms, {attempts} attempt(s); last error: "
        f"{type(last).__name__}: {last}); the server is stalled or unreachable and the call "
        "may or may not have taken effect: check the server, then call it again "
        "(with a larger timeout_ms or default_api_timeout_ms to wait longer)"
    )
