"""The cluster client's one retry loop, ``retry_routed``: its three routes differ only in
what one attempt does and which answers mean "again".

    route (``cluster``)           one attempt                          again after
    a partition's leader          the call at the leader the metadata  ROUTING_ERRORS
      (produce, fetch, ...)       names now                            (a pause no shorter
                                                                       than the wait for
                                                                       the next refresh)
    a key's coordinator           the call at the coordinator found    COORDINATOR_RETRY_ERRORS
      (transactions, groups)      for the key now
    an idempotent producer's id   every live broker in turn            NO_ID_HERE_ERRORS

An attempt picks its target anew, and on an answer that says the target moved it
forgets what it knew (marks the metadata stale, forgets the coordinator, suspects a
broker that did not answer) before raising it, so the next attempt goes where the
cluster is now. Any other error ends the call at once.

Between two attempts the pause is the backoff policy's (``engine.base.backoff``) for
that many failures in a row. The loop gives up, raising the last answer as it is, when
the pause would reach the call's deadline or after ``ROUTING_ATTEMPTS_MAX`` attempts;
every request of the call runs under the deadline (``deadline_at``), cut to what is left
of it, so a call never waits past it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from twinlog.engine.base.backoff import Backoff
from twinlog.engine.base.errors import TwinlogError
from twinlog.rpc.client.call_deadline import deadline_at, sent_nothing

log = logging.getLogger("twinlog.client")

Result = TypeVar("Result")

ROUTING_ATTEMPTS_MAX = 100  # with 1 s pauses, a bound far above any deadline's


def no_floor() -> float:
    return 0.0


def retry_routed(
    attempt: Callable[[], Result],
    *,
    retry_on: tuple[type[TwinlogError], ...],
    deadline_s: float,
    backoff: Backoff,
    what: Callable[[], str],
    sleep: Callable[[float], None] = time.sleep,
    pause_floor_s: Callable[[], float] = no_floor,
) -> Result:
    """``attempt()`` until it returns, raises an error not in ``retry_on``, or runs out of
    time (``deadline_s``, monotonic) or attempts: then the last error is raised.

    ``what()``: the call and where its last attempt went, for the log; ``pause_floor_s()``:
    the shortest pause worth taking now (the leader route's wait for a refresh)."""
    with deadline_at(deadline_s):
        failures = 0
        answered: TwinlogError | None = None  # the last refusal a broker gave
        while True:
            try:
                return attempt()
            except TwinlogError as error:
                if answered is not None and sent_nothing(error):
                    # The deadline passed before the retry went out: the broker's own last
                    # answer says more than "nothing was sent" (as call_with_retry does).
                    raise answered from error
                if not isinstance(error, retry_on):
                    raise
                answered = error
                failures += 1
                pause_s = max(backoff.delay_s(failures), pause_floor_s())
                if failures >= ROUTING_ATTEMPTS_MAX or time.monotonic() + pause_s >= deadline_s:
                    raise
                log.debug(
                    "%s: %s: %s; again in %.0f ms",
                    what(),
                    type(error).__name__,
                    error,
                    pause_s * 1000,
                )
                sleep(pause_s)
