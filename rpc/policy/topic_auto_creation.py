"""A topic created on a producer's first use (Kafka's auto.create.topics.enable): what both
doors wrap the creation in, once the broker has decided to create it.

The broker decides whether a missing topic is created (its ``auto_create_topics_enable``,
the name) and with what (``num_partitions``, ``default_replication_factor``); the door
checks that the caller may CREATE the topic, as ``twinlog topics create`` and Kafka's
CreateTopics need, and writes the audit log's ``topic.create`` line (``auto_created=true``).
A refusal says which permission is missing; nothing is created.

Thread rule: stateless; any thread.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

from twinlog.engine.base.errors import AuthorizationError
from twinlog.rpc.policy.audit import audited
from twinlog.rpc.policy.auth import Guard, Operation, Principal


def auto_creation(
    guard: Guard,
    principal: Principal,
    name: str,
    refused: Callable[[str], AuthorizationError] = AuthorizationError,
    **audit_fields: Any,
) -> Callable[[], AbstractContextManager[object]]:
    """What the broker wraps the creation of ``name`` in: ``principal``'s CREATE checked
    (the denial audited as acl.denied, then raised as ``refused(message)``), the creation
    audited as topic.create with ``audit_fields``."""

    @contextlib.contextmanager
    def creating() -> Iterator[None]:
        try:
            guard.require(principal, Operation.CREATE, (name,))
        except AuthorizationError as error:
            raise refused(
                f"topic {name!r} does not exist, and creating it on first use "
                f"(auto.create.topics.enable) needs CREATE on it: {error}"
            ) from None
        with audited(
            "topic.create",
            principal=principal.name,
            topic=name,
            auto_created="true",
            **audit_fields,
        ):
            yield

    return creating
