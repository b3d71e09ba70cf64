"""Grants made at run time (``twinlog acls add``, Kafka's CreateAcls), as Kafka's ACL
bindings: a principal, an operation, and a resource pattern (a kind of resource, a name,
and LITERAL or PREFIXED), permission ALLOW from any host. Each is a ``Grant`` of
``auth`` whose ``pattern_type`` says how its name matches (the ACL file's are globs).

    {"principal": "alice", "operation": "write", "resource": "topic", "name": "orders",
     "pattern_type": "literal"}

is how a store keeps one (``acl_store``). ``check_binding`` refuses what no grant can
mean (an operation that does not apply to the kind, a cluster named other than
``kafka-cluster``) with a message saying what to write instead. ``AclFilter`` is Kafka's
filter of DescribeAcls and DeleteAcls (every field optional; pattern type ANY or MATCH).

Thread rule: stateless; any thread.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from twinlog.engine.base.errors import InvalidConfigError
from twinlog.rpc.policy.auth import (
    ALL_OPERATIONS,
    CLUSTER_NAME,
    OPERATIONS_ON,
    Grant,
    Operation,
    PatternType,
    Resource,
    resource_pattern,
)

# The kinds of resource by the word the CLI, the stores and the ACL file's prefixes use.
RESOURCE_WORDS: dict[str, Resource] = {
    "topic": Resource.TOPIC,
    "group": Resource.GROUP,
    "transactional-id": Resource.TRANSACTIONAL_ID,
    "cluster": Resource.CLUSTER,
    "broker": Resource.BROKER,
}
WORD_OF_RESOURCE = {resource: word for word, resource in RESOURCE_WORDS.items()}
OPERATION_WORDS = (*(item.value for item in Operation), ALL_OPERATIONS)
KEYS = ("principal", "operation", "resource", "name", "pattern_type")


class Source(Enum):
    FILE = "acl-file"  # the --acl-file's grants: changed by editing the file
    STORE = "store"  # made at run time: durable, removable


def resource_of_word(word: str) -> Resource:
    try:
        return RESOURCE_WORDS[word]
    except KeyError:
        raise InvalidConfigError(
            f"resource type {word!r} is not one of {', '.join(RESOURCE_WORDS)}"
        ) from None


def describe_grant(grant: Grant) -> str:
    """``alice write topic:orders (literal)``: one grant in one phrase, for messages and
    the audit log."""
    kind = WORD_OF_RESOURCE[grant.resource]
    return (
        f"{grant.principal} {grant.operation} {kind}:{grant.pattern} ({grant.pattern_type.value})"
    )


def check_binding(grant: Grant) -> Grant:
    """``grant`` if it may be stored; InvalidConfigError saying why not otherwise."""
    what = describe_grant(grant)
    if grant.pattern_type is PatternType.GLOB:
        raise InvalidConfigError(
            f"{what}: grants made at run time are LITERAL or PREFIXED; globs belong in the ACL file"
        )
    if not grant.principal or any(c.isspace() for c in grant.principal):
        raise InvalidConfigError(
            f"{what}: the principal must be one word ('*': every authenticated principal)"
        )
    if grant.operation not in OPERATION_WORDS:
        raise InvalidConfigError(
            f"{what}: operation {grant.operation!r} is not one of {', '.join(OPERATION_WORDS)}"
        )
    if not grant.pattern:
        raise InvalidConfigError(f"{what}: the resource name is empty; '*' names every one")
    if grant.operation == Operation.ABORT.value and grant.resource is not Resource.TRANSACTIONAL_ID:
        raise InvalidConfigError(f"{what}: abort applies to transactional ids only")
    if grant.operation not in (ALL_OPERATIONS, Operation.ABORT.value):
        operation = Operation(grant.operation)
        if operation not in OPERATIONS_ON[grant.resource]:
            fits = ", ".join(sorted(item.value for item in OPERATIONS_ON[grant.resource]))
            raise InvalidConfigError(
                f"{what}: operation {grant.operation!r} does not apply to "
                f"{grant.resource.value}s (those take {fits}, all)"
            )
    if grant.resource is Resource.CLUSTER and (
        grant.pattern_type is not PatternType.LITERAL or grant.pattern not in (CLUSTER_NAME, "*")
    ):
        raise InvalidConfigError(
            f"{what}: the cluster has one name, {CLUSTER_NAME!r} (LITERAL), as in Kafka"
        )
    if grant.resource is Resource.BROKER and (
        grant.pattern_type is not PatternType.LITERAL
        or not (grant.pattern == "*" or grant.pattern.isdigit())
    ):
        raise InvalidConfigError(f"{what}: a broker is named by its id (LITERAL), or '*'")
    return grant


def binding_to_json(grant: Grant) -> dict[str, str]:
    return {
        "principal": grant.principal,
        "operation": grant.operation,
        "resource": WORD_OF_RESOURCE[grant.resource],
        "name": grant.pattern,
        "pattern_type": grant.pattern_type.value,
    }


def binding_of_json(entry: Mapping[str, Any], where: str) -> Grant:
    """One stored grant; InvalidConfigError naming ``where`` when it is not one."""
    if not isinstance(entry, Mapping) or sorted(entry) != sorted(KEYS):
        raise InvalidConfigError(f"{where}: an ACL entry must have exactly {', '.join(KEYS)}")
    if not all(isinstance(entry[key], str) for key in KEYS):
        raise InvalidConfigError(f"{where}: every field of an ACL entry is a string")
    try:
        pattern_type = PatternType(entry["pattern_type"])
    except ValueError:
        raise InvalidConfigError(
            f"{where}: pattern type {entry['pattern_type']!r} is not literal or prefixed"
        ) from None
    grant = Grant(
        entry["principal"],
        entry["operation"],
        entry["name"],
        resource_of_word(entry["resource"]),
        pattern_type,
    )
    try:
        return check_binding(grant)
    except InvalidConfigError as error:
        raise InvalidConfigError(f"{where}: {error}") from None


def kafka_form(grant: Grant) -> tuple[PatternType, str] | None:
    """The grant's pattern as Kafka names one (LITERAL or PREFIXED, and the name); an ACL
    file glob only when it is one of those (``orders``, ``orders*``, ``*``), else None."""
    if grant.pattern_type is not PatternType.GLOB:
        return grant.pattern_type, grant.pattern
    if grant.resource is Resource.CLUSTER:
        return PatternType.LITERAL, CLUSTER_NAME  # "cluster:*" and "cluster:kafka-cluster"
    if grant.pattern == "*":
        return PatternType.LITERAL, "*"
    head = grant.pattern[:-1] if grant.pattern.endswith("*") else grant.pattern
    if any(character in head for character in "*?[]"):
        return None
    return (PatternType.PREFIXED if head != grant.pattern else PatternType.LITERAL), head


def file_form(grant: Grant) -> str:
    """The grant as an ACL file line would write it (a glob's own pattern)."""
    return f"{grant.principal} {grant.operation} {resource_pattern(grant.resource, grant.pattern)}"


KAFKA_RESOURCES = frozenset(
    {Resource.TOPIC, Resource.GROUP, Resource.TRANSACTIONAL_ID, Resource.CLUSTER}
)


def kafka_nameable(grant: Grant) -> bool:
    return (
        grant.resource in KAFKA_RESOURCES
        and grant.operation != Operation.ABORT.value
        and kafka_form(grant) is not None
    )


class PatternFilter(Enum):
    """Which patterns a filter's name selects (Kafka's filter pattern types)."""

    ANY = "any"  # the name itself, of any pattern type
    MATCH = "match"  # every pattern that matches the name (LITERAL, '*', PREFIXED of it)
    LITERAL = "literal"
    PREFIXED = "prefixed"


@dataclass(frozen=True)
class AclFilter:
    """Kafka's ACL binding filter; None matches anything."""

    principal: str | None = None
    operation: str | None = None
    resource: Resource | None = None
    name: str | None = None
    pattern: PatternFilter = PatternFilter.ANY
    # Kafka's filters: only the grants Kafka can name (not twinlog's broker grants, abort
    # grants, nor a file glob Kafka cannot write)
    kafka_only: bool = False

    def matches(self, grant: Grant) -> bool:
        if self.kafka_only and not kafka_nameable(grant):
            return False
        if self.principal is not None and grant.principal != self.principal:
            return False
        if self.operation is not None and grant.operation != self.operation:
            return False
        if self.resource is not None and grant.resource is not self.resource:
            return False
        form = kafka_form(grant)
        if form is None:  # a glob Kafka cannot name: matched by name as a glob, or not at all
            return self.pattern in (PatternFilter.ANY, PatternFilter.MATCH) and (
                self.name is None
                or self.name == grant.pattern
                or (
                    self.pattern is PatternFilter.MATCH
                    and fnmatch.fnmatchcase(self.name, grant.pattern)
                )
            )
        pattern_type, name = form
        if self.pattern is PatternFilter.MATCH:
            if self.name is None:
                return True
            if pattern_type is PatternType.PREFIXED:
                return self.name.startswith(name)
            return name in ("*", self.name)
        if self.pattern is not PatternFilter.ANY and pattern_type.value != self.pattern.value:
            return False
        return self.name is None or name == self.name


def exact_filter(grant: Grant) -> AclFilter:
    """The filter of this one grant as Kafka names it (an ACL file glob written the same
    way matches it too)."""
    return AclFilter(
        grant.principal,
        grant.operation,
        grant.resource,
        grant.pattern,
        PatternFilter(grant.pattern_type.value),
    )


def matching(grants: Iterable[Grant], filter_: AclFilter) -> list[Grant]:
    return [grant for grant in grants if filter_.matches(grant)]


@dataclass(frozen=True)
class AclEntry:
    """A grant as the client and the CLI name one: words, not enums.

    ``AclEntry("alice", "write", "topic", "orders")`` lets alice produce to ``orders``;
    ``pattern_type="prefixed"`` to every topic whose name starts so. ``source`` is the
    server's answer: ``acl-file`` or ``store``."""

    principal: str
    operation: str
    resource_type: str
    name: str
    pattern_type: str = PatternType.LITERAL.value
    source: str = Source.STORE.value

    def to_grant(self) -> Grant:
        """The grant; InvalidConfigError for a resource or pattern type no grant has."""
        try:
            pattern_type = PatternType(self.pattern_type.lower())
            if pattern_type is PatternType.GLOB:
                raise ValueError(pattern_type)
        except ValueError:
            raise InvalidConfigError(
                f"pattern type {self.pattern_type!r} is not literal or prefixed"
            ) from None
        return Grant(
            self.principal,
            self.operation.lower(),
            self.name,
            resource_of_word(self.resource_type.lower()),
            pattern_type,
        )

    @classmethod
    def of_grant(cls, grant: Grant, source: Source = Source.STORE) -> AclEntry:
        return cls(
            grant.principal,
            grant.operation,
            WORD_OF_RESOURCE[grant.resource],
            grant.pattern,
            grant.pattern_type.value,
            source.value,
        )
