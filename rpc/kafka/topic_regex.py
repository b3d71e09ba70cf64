"""A KIP-848 subscription by regular expression (ConsumerGroupHeartbeat v1's
SubscribedTopicRegex), resolved by the Kafka door to the topic names it matches, which the
coordinator then assigns like any subscription (it never runs a member's expression
itself, ``engine/groups``).

The expression is RE2's (google-re2, Google's own bindings), as Kafka's RE2/J: matching
takes time linear in the name, whatever the expression, so no member can stall the door
with a catastrophic one (Python's ``re`` backtracks). A name matches when the whole of it
does (Java's ``Matcher.matches``). Internal topics (``__*``) never match, and a topic the
principal may not read is left out silently, as Kafka leaves out those it may not
describe.
"""

from __future__ import annotations

from typing import Any

import re2

from twinlog.engine.broker.internal_topics import is_internal
from twinlog.rpc.kafka.access import may
from twinlog.rpc.kafka.context import KafkaContext
from twinlog.rpc.policy.auth import Operation, Resource

_QUIET = re2.Options()
_QUIET.log_errors = False  # a client's bad expression is answered, not logged by RE2


class InvalidTopicRegex(ValueError):
    """The expression does not compile; the message says why."""


def compile_topic_regex(pattern: str) -> Any:
    try:
        return re2.compile(pattern, options=_QUIET)
    except re2.error as error:
        reason = error.args[0] if error.args else error
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise InvalidTopicRegex(f"Invalid regular expression {pattern!r}: {reason}") from None


def topics_matching(context: KafkaContext, pattern: str) -> tuple[str, ...]:
    """The topics ``pattern`` matches whole, that the caller may read, internal ones never
    (InvalidTopicRegex when it does not compile)."""
    compiled = compile_topic_regex(pattern)
    principal = context.connection.principal
    return tuple(
        sorted(
            name
            for name in context.broker.list_topics()
            if not is_internal(name)
            and compiled.fullmatch(name) is not None
            and may(context.guard, principal, Operation.READ, name, Resource.TOPIC)
        )
    )
