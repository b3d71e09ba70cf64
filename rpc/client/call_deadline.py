"""The deadline of the client call under way in this thread, as gRPC propagates deadlines.

A public call (``commit_transaction()``, ``Consumer.committed()``, an ``Admin`` call, ...)
sets its deadline once; every request made on its way, retries included, takes
``request_timeout_s`` as its gRPC timeout, so that the call as a whole never outlasts
its deadline whatever the server does. A context variable rather than a parameter of
every broker method: the embedded broker and the wire API keep their signatures, and
a deadline set by an outer call bounds the calls nested in it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextvars import ContextVar

from twinlog.engine.base.errors import BrokerUnavailableError, RequestTimedOutError

# Errors that mean "no answer from the server" (unreachable, stalled, a deadline passed)
# rather than an answer: when time runs out after one, the caller is told that the call
# timed out; after an answer (DiskFullError, say), that answer says more.
NO_ANSWER_ERRORS = (BrokerUnavailableError, RequestTimedOutError)

UNSENT = "the call's deadline passed before this request was sent"

_deadline_s: ContextVar[float | None] = ContextVar("twinlog_call_deadline_s", default=None)


@contextlib.contextmanager
def deadline_at(deadline_s: float) -> Iterator[None]:
    """Bound the requests made inside the block by ``deadline_s`` (monotonic seconds).

    A deadline already set by an enclosing call is kept when it is the earlier one.
    """
    current_s = _deadline_s.get()
    token = _deadline_s.set(deadline_s if current_s is None else min(current_s, deadline_s))
    try:
        yield
    finally:
        _deadline_s.reset(token)


def current_deadline_s() -> float | None:
    return _deadline_s.get()


def deadline_passed() -> bool:
    """Whether the call under way has no time left: a loop over brokers stops asking (a
    request it sent now would fail unsent, and say nothing of the broker)."""
    deadline_s = _deadline_s.get()
    return deadline_s is not None and time.monotonic() >= deadline_s


def sent_nothing(error: BaseException) -> bool:
    """Whether ``error`` is ``request_timeout_s``'s refusal to send: it says nothing of
    the broker the request was for (no broker is suspected of it)."""
    return isinstance(error, RequestTimedOutError) and str(error).startswith(UNSENT)


def request_timeout_s(default_s: float) -> float:
    """The gRPC timeout of a request made now: ``default_s``, cut to the call's deadline.

    Raises RequestTimedOutError when the deadline has already passed: sending a
    request that cannot be answered in time would only add load to a stalled server.
    """
    deadline_s = _deadline_s.get()
    if deadline_s is None:
        return default_s
    remaining_s = deadline_s - time.monotonic()
    if remaining_s <= 0:
        raise RequestTimedOutError(f"{UNSENT}; nothing was sent")
    return min(default_s, remaining_s)
