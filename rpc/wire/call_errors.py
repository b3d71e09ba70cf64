"""Ending a servicer call with a typed error: the status code and trailing metadata of
``twinlog.rpc.wire.errors`` (the one mapping), logged once. Every service uses it: the
client-facing ones (``rpc/server/call.py``) and the broker-to-broker ones
(``rpc/replication``), which log retriable refusals (a moved leader, a stale epoch:
routine during a leader change) at DEBUG.

Unexpected exceptions are logged with their traceback and answered as INTERNAL.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar

import grpc

from twinlog.engine.base.errors import TwinlogError
from twinlog.rpc.wire.errors import describe

Request = TypeVar("Request")
Response = TypeVar("Response")
Method = Callable[[Any, Request, grpc.ServicerContext], Response]


def log_failure(
    logger: logging.Logger, what: str, error: BaseException, retriable_level: int = logging.INFO
) -> None:
    if isinstance(error, TwinlogError):
        level = retriable_level if error.retriable else logging.INFO
        logger.log(level, "%s failed: %s: %s", what, type(error).__name__, error)
    else:
        logger.error("%s failed unexpectedly", what, exc_info=error)


def abort_with(
    context: grpc.ServicerContext,
    what: str,
    error: BaseException,
    logger: logging.Logger,
    retriable_level: int = logging.INFO,
) -> None:
    """End the call with the error's status and metadata (raises, as context.abort does)."""
    log_failure(logger, what, error, retriable_level)
    description = describe(error)
    context.set_trailing_metadata(description.trailing_metadata())
    context.abort(description.code, description.message)


def answering_errors(
    logger: logging.Logger, retriable_level: int = logging.INFO
) -> Callable[[Method[Request, Response]], Method[Request, Response]]:
    """A decorator for unary servicer methods: any exception leaves as ``abort_with``."""

    def decorate(method: Method[Request, Response]) -> Method[Request, Response]:
        @functools.wraps(method)
        def wrapper(self: Any, request: Request, context: grpc.ServicerContext) -> Response:
            try:
                return method(self, request, context)
            except Exception as error:
                abort_with(context, method.__name__, error, logger, retriable_level)
                raise  # not reached: abort raises

        return wrapper

    return decorate
