"""What every server method shares: authentication and the error mapping.

``@unary`` wraps a servicer method so that any exception leaves as the status
code of ``twinlog.rpc.wire.errors`` plus its trailing metadata; unexpected exceptions are
logged with their traceback and answered as INTERNAL.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

import grpc

from twinlog.engine.base.errors import AuthenticationError
from twinlog.rpc.policy.audit import audit
from twinlog.rpc.policy.auth import Guard, Principal
from twinlog.rpc.wire import call_errors

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
    call_errors.log_failure(log, method_name, error)


def abort_with(context: grpc.ServicerContext, method_name: str, error: BaseException) -> None:
    """End the call with the error's status and metadata (raises, as context.abort does)."""
    call_errors.abort_with(context, method_name, error, log)


unary = call_errors.answering_errors(log)
