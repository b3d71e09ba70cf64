"""What every server method shares: authentication and the error mapping.

``@unary`` wraps a servicer method so that any exception leaves as the status
code of ``twinlog.rpc.wire.errors`` plus its trailing metadata; unexpected exceptions are
logged with their traceback and answered as INTERNAL.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar

import grpc

from twinlog.engine.base.errors import AuthenticationError, TwinlogError
from twinlog.rpc.server.audit import audit
from twinlog.rpc.server.auth import Guard, Principal
from twinlog.rpc.wire.errors import describe

log = logging.getLogger("twinlog.server")

Request = TypeVar("Request")
Response = TypeVar("Response")
Method = Callable[[Any, Request, grpc.ServicerContext], Response]


def identify(guard: Guard, context: grpc.ServicerContext) -> Principal:
    """Who calls; raises AuthenticationError (without auditing it: ``principal_of`` does)."""
    common_name = None
    if guard.mutual_tls:
        names = context.auth_context().get("x509_common_name") or []
        if names:
            first = names[0]
            common_name = first.decode() if isinstance(first, bytes) else str(first)
    return guard.authenticate(context.invocation_metadata() or (), common_name)


def principal_of(guard: Guard, context: grpc.ServicerContext) -> Principal:
    """Who calls; a failed authentication is audited (the token itself never is)."""
    try:
        return identify(guard, context)
    except AuthenticationError as error:
        audit("authentication.failed", peer=context.peer(), reason=str(error))
        raise


def log_failure(method_name: str, error: BaseException) -> None:
    if isinstance(error, TwinlogError):
        log.info("%s failed: %s: %s", method_name, type(error).__name__, error)
    else:
        log.error("%s failed unexpectedly", method_name, exc_info=error)


def abort_with(context: grpc.ServicerContext, method_name: str, error: BaseException) -> None:
    """End the call with the error's status and metadata (raises, as context.abort does)."""
    log_failure(method_name, error)
    description = describe(error)
    context.set_trailing_metadata(description.trailing_metadata())
    context.abort(description.code, description.message)


def unary(method: Method[Request, Response]) -> Method[Request, Response]:
    @functools.wraps(method)
    def wrapper(self: Any, request: Request, context: grpc.ServicerContext) -> Response:
        try:
            return method(self, request, context)
        except Exception as error:
            abort_with(context, method.__name__, error)
            raise  # not reached: abort raises

    return wrapper
