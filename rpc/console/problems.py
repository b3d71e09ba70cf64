"""Errors as a page says them: one readable sentence, never a stack trace.

A page built of several parts (the overview asks for the metadata, the transactions and
the groups) shows what it got and says, part by part, what it could not get.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from twinlog.engine.base.errors import (
    AuthenticationError,
    AuthorizationError,
    BrokerUnavailableError,
    RequestTimedOutError,
    TwinlogError,
    UnknownTopicOrPartitionError,
)

Value = TypeVar("Value")


@dataclass(frozen=True)
class Problem:
    """``kind``: not-permitted, unauthenticated, unreachable, timeout, not-found or error."""

    kind: str
    message: str

    @property
    def http_status(self) -> int:
        return {
            "not-permitted": 403,
            "unauthenticated": 401,
            "not-found": 404,
            "unreachable": 503,
            "timeout": 504,
        }.get(self.kind, 502)


def problem_of(error: TwinlogError, what: str) -> Problem:
    """``what``: what was being asked (``the topics``, ``group billing``)."""
    if isinstance(error, AuthorizationError):
        return Problem(
            "not-permitted",
            f"Not permitted: the console's token may not read {what} ({error}). Ask for a "
            "grant in the broker's ACL file, or open the console with another token.",
        )
    if isinstance(error, AuthenticationError):
        return Problem(
            "unauthenticated",
            f"The broker refused the console's token ({error}): start the console with "
            "--token-file naming a token the broker knows.",
        )
    if isinstance(error, RequestTimedOutError):
        return Problem(
            "timeout",
            f"No answer about {what} in time: the cluster is slow or a broker is down ({error}).",
        )
    if isinstance(error, BrokerUnavailableError):
        return Problem("unreachable", f"Cannot reach the broker for {what}: {error}")
    if isinstance(error, UnknownTopicOrPartitionError):
        return Problem("not-found", f"Not found: {error}")
    return Problem("error", f"{type(error).__name__} while reading {what}: {error}")


def attempt(call: Callable[[], Value], what: str, problems: list[Problem]) -> Value | None:
    """``call()``, or None with its problem added to ``problems``."""
    try:
        return call()
    except TwinlogError as error:
        problems.append(problem_of(error, what))
        return None
