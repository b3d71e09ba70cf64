"""The audit log: who changed what, and who was refused, on logger ``twinlog.audit`` at INFO.

Each event is one structured line (``twinlog.rpc.policy.structured_log``)::

    topic.create principal=ops peer=ipv4:127.0.0.1:50312 topic=orders partitions=3 outcome=ok
    transaction.abort principal=ops peer=... transaction_id=4353 transactional_id=loader outcome=ok
    acl.denied principal=bob action=write resource=topic name=orders
    acl.denied principal=bob action=write resource=topic name=orders door=kafka peer=10.0.0.7:41240
    authentication.failed peer=ipv4:10.0.0.7:41234 reason="the bearer token is not known ..."
    authentication.failed peer=10.0.0.7:41240 door=kafka mechanism=PLAIN user=bob reason="..."

Only administrative changes are audited (CreateTopic, DeleteTopic, the admin
AbortTransaction of ``twinlog txn abort``; the Kafka listener's topic changes too: each
of its lines, refusals included, carries ``door=kafka`` and the client's address, from
``audit_scope``), with refusals; the commits and aborts a
producer makes of its own transactions are its data path, visible in the request
log instead. Tokens never appear: a failed authentication logs why, not what.

Thread rule: stateless; any thread.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

from twinlog.engine.base.errors import AuthorizationError
from twinlog.rpc.policy.structured_log import log_event

AUDIT_LOGGER = "twinlog.audit"
audit_log = logging.getLogger(AUDIT_LOGGER)
# Fields every audit line of the running request carries (``audit_scope``).
_scope: contextvars.ContextVar[Mapping[str, Any]] = contextvars.ContextVar(
    "twinlog_audit_scope", default=MappingProxyType({})
)


def audit(event: str, /, **fields: Any) -> None:
    for name, value in _scope.get().items():
        fields.setdefault(name, value)
    log_event(audit_log, logging.INFO, event, **fields)


@contextlib.contextmanager
def audit_scope(**fields: Any) -> Iterator[None]:
    """Every audit line written in the block (by this thread) carries ``fields`` too, after
    its own: the Kafka listener's door and client address on each of a request's lines,
    an ``acl.denied`` included."""
    token = _scope.set({**_scope.get(), **fields})
    try:
        yield
    finally:
        _scope.reset(token)


@contextlib.contextmanager
def audited(event: str, /, **fields: Any) -> Iterator[None]:
    """Audit the block's change once it is done: outcome=ok, or outcome=failed with the
    error's class (a refusal by the ACL is audited where it is decided, as acl.denied)."""
    try:
        yield
    except AuthorizationError:
        raise
    except Exception as error:
        audit(event, **fields, outcome="failed", error=type(error).__name__)
        raise
    audit(event, **fields, outcome="ok")
