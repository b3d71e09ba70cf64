"""Authentication (bearer tokens, or mutual-TLS certificates) and per-principal ACLs.

Tokens file (``--tokens-file``), one token per line, ``#`` comments::

    # token                              principal
    9c1d0a4e5f0b4e7c8a2d3f6e1b7c9d05     alice
    3e8f2a9b7c6d5e4f3a2b1c0d9e8f7a6b     ops

ACL file (``--acl-file``), one grant per line: ``PRINCIPAL OPERATION PATTERN``. The
pattern is a shell-style glob (``orders.*``, ``*``) over topic names, or, written
``transactional-id:GLOB``, over transactional ids (Kafka's TransactionalId
resource), or, written ``group:GLOB``, over consumer group ids (Kafka's Group
resource). Principal ``*`` means every authenticated principal; ``all`` grants
every operation that applies to the pattern's kind (and, without a prefix,
``abort`` too: its pattern has always named transactional ids)::

    # principal  operation  pattern
    alice        write      orders*                   # produce to these topics
    alice        read       *                         # fetch, list offsets, describe producers
    alice        read       group:billing*            # commit, fetch and send offsets of these groups
    alice        write      transactional-id:loader*  # init, begin, send, commit, abort
    audit        describe   transactional-id:*        # see them in txn list / producers
    audit        describe   group:*                   # see groups named in txn list
    ops          create     *
    ops          delete     *
    ops          alter      *                         # add partitions, move leaders, replicas
    ops          abort      *                         # abort anyone's transaction (admin)
    ops          alter      broker:*                  # stop a broker (decommission)
    ops          alter      cluster:*                 # set and delete SCRAM credentials
    ops          read       __consumer_offsets        # internal topics: only by their name

| operation | on | allows |
| --- | --- | --- |
| read | topics | Fetch, ListOffset, DescribeProducers (filtered, below); the topics of group offsets |
| write | topics | Produce, adding the topic to a transaction |
| create, delete | topics | CreateTopic, DeleteTopic; delete: DeleteRecords of their partitions |
| alter | topics | CreatePartitions (grow the topic); ElectLeaders of their partitions (all topics: every topic's); ReassignPartitions of their partitions; what alter-configs allows |
| alter-configs | topics | AlterTopicConfig (Kafka's AlterConfigs, IncrementalAlterConfigs) |
| describe | topics | seeing the topic at the Kafka listener (Metadata, OffsetForLeaderEpoch); read, write, delete and alter imply it; twinlog's own door lists and describes every topic to every authenticated principal |
| describe-configs | topics | Kafka's DescribeConfigs of the topic; alter-configs, read and write imply it (twinlog's own door shows a topic's settings to every authenticated principal) |
| write | transactional ids | InitProducer with that id, then Begin, AddPartitions, SendOffsets, Commit, Abort and Produce (transactional or not) with its producer id |
| describe | transactional ids | seeing its transactions (ListTransactions) and its producer (DescribeProducers) |
| abort | transactional ids | ``twinlog txn abort`` of its transactions; the pattern may omit ``transactional-id:`` |
| read | groups | CommitOffsets, FetchOffsets, SendOffsetsToTransaction for that group |
| describe | groups | seeing the group named in ListTransactions |
| alter | brokers | ShutdownBroker of that broker (`twinlog cluster decommission`); the pattern is `broker:ID` or `broker:*` |
| alter | the cluster | setting and deleting SCRAM credentials (`twinlog users`, AlterUserScramCredentials); the pattern is `cluster:*` (or `cluster:kafka-cluster`) |
| describe | the cluster | listing SCRAM users and their mechanisms (DescribeUserScramCredentials); alter implies it |
| alter | the cluster | also what alter allows on every topic, internal ones included (Kafka asks it for elections and reassignments); it administers the ACLs, so it could grant itself those anyway |
| create | the cluster | creating any topic (Kafka's rule for CreateTopics) |
| idempotent-write, alter-configs, describe-configs | the cluster | nothing more: an idempotent producer needs only write on its topics (as Kafka 2.8 on); twinlog's broker settings do not change at run time |

Read, write, delete and alter imply describe on topics; write and abort on
transactional ids; read on groups; alter on the cluster (``IMPLIES_DESCRIBE``); create and alter on the
cluster, and alter on a topic, imply more (``ALSO_ALLOWED_BY``).
Which transactional id a request acts for is derived from its producer id on every
call (the broker keeps that mapping on disk, so it holds across server restarts and
re-inits): a principal without write on alice's transactional id cannot begin,
commit, abort or fence her transactions, nor send into them, even knowing her
producer id. A group's offsets are checked before KIP-447 fencing runs: a principal
without read on alice's group can neither abort her transaction holding its offsets
nor fence her producer by taking them first.

An idempotent (non-transactional) producer's id belongs to the principal that
called InitProducer for it (the broker records the principal with the id, on
disk): a batch carrying a producer id that was not given to the caller (read off
another producer's batch header, or never issued) is refused, so nobody can write
another's next sequence (her next record would be acknowledged as a duplicate and
dropped) nor fence her with a newer generation. Otherwise idempotent producers need
only write on their topics, as in Kafka.

Internal topics (names starting ``__``, such as ``__consumer_offsets``, which holds
every group's offsets) are matched only by a pattern that itself starts ``__``:
``read *`` does not read them, ``ops read __consumer_offsets`` (an admin) does.

Grants can also be made at run time (``twinlog acls add``, Kafka's CreateAcls): LITERAL
or PREFIXED patterns (``PatternType``) kept in the broker's store and applied beside the
file's (``acl_view``: a union; the file's cannot be removed at run time).

Without an ACL file every authenticated principal may do everything, and
ListTransactions and DescribeProducers show everything. Listing and describing
topics needs authentication only.

Tokens are compared with ``hmac.compare_digest`` against every known token (no
early exit, no dict lookup on the secret), and are never logged or put in an
error message.
"""

from __future__ import annotations

import fnmatch
import hmac
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from twinlog.engine.base.errors import AuthenticationError, AuthorizationError, InvalidConfigError
from twinlog.engine.broker.internal_topics import INTERNAL_TOPIC_PREFIX, is_internal
from twinlog.rpc.policy.audit import audit
from twinlog.rpc.wire.metadata import AUTHORIZATION_KEY

BEARER_PREFIX = "bearer "
TOKEN_BYTES_MIN = 16
ANONYMOUS = "anonymous"


class Operation(Enum):
    READ = "read"  # fetch, list offsets of a topic; commit or fetch a group's offsets
    WRITE = "write"  # produce to a topic; use a transactional id
    CREATE = "create"  # create a topic
    # delete a topic, or its oldest records (DeleteRecords); a group, or its offsets
    DELETE = "delete"
    # grow a topic, move its leaders and replicas (Kafka asks ALTER on the cluster for these)
    ALTER = "alter"
    ABORT = "abort"  # abort another producer's transaction (admin)
    DESCRIBE = "describe"  # see a transactional id's transactions and producer; see a group
    # Kafka's other grantable operations, as its tools grant them
    ALTER_CONFIGS = "alter-configs"  # change a topic's settings (AlterConfigs)
    DESCRIBE_CONFIGS = "describe-configs"  # every authenticated principal may already
    IDEMPOTENT_WRITE = "idempotent-write"  # implied by write on a topic, as Kafka >= 2.8


class PatternType(Enum):
    """How a grant's pattern names resources: the ACL file's shell-style glob, or Kafka's
    two (grants made at run time, ``acl_bindings``)."""

    GLOB = "glob"  # fnmatch: "orders*", "*"
    LITERAL = "literal"  # the name itself; "*" is every name (Kafka's wildcard)
    PREFIXED = "prefixed"  # every name starting with it


class Resource(Enum):
    TOPIC = "topic"
    TRANSACTIONAL_ID = "transactional id"
    GROUP = "group"
    BROKER = "broker"  # a broker of the cluster, by id ("broker:3", "broker:*")
    CLUSTER = "cluster"  # the cluster itself: one name, CLUSTER_NAME (Kafka's kafka-cluster)


ALL_OPERATIONS = "all"
TRANSACTIONAL_ID_PREFIX = "transactional-id:"
GROUP_PREFIX = "group:"
BROKER_PREFIX = "broker:"
CLUSTER_PREFIX = "cluster:"
CLUSTER_NAME = "kafka-cluster"  # what a cluster grant's pattern matches (Kafka's name)
# How a pattern names each kind of resource in the ACL file (topics: no prefix).
PREFIXES = {
    Resource.TOPIC: "",
    Resource.TRANSACTIONAL_ID: TRANSACTIONAL_ID_PREFIX,
    Resource.GROUP: GROUP_PREFIX,
    Resource.BROKER: BROKER_PREFIX,
    Resource.CLUSTER: CLUSTER_PREFIX,
}
OPERATIONS_ON = {
    Resource.TOPIC: {
        Operation.READ,
        Operation.WRITE,
        Operation.CREATE,
        Operation.DELETE,
        Operation.ALTER,
        Operation.DESCRIBE,
        Operation.ALTER_CONFIGS,
        Operation.DESCRIBE_CONFIGS,
    },
    Resource.TRANSACTIONAL_ID: {Operation.WRITE, Operation.DESCRIBE, Operation.ABORT},
    Resource.GROUP: {Operation.READ, Operation.DESCRIBE, Operation.DELETE},  # Kafka's three
    Resource.BROKER: {Operation.ALTER},
    Resource.CLUSTER: {
        Operation.ALTER,
        Operation.DESCRIBE,
        Operation.CREATE,
        Operation.ALTER_CONFIGS,
        Operation.DESCRIBE_CONFIGS,
        Operation.IDEMPOTENT_WRITE,
    },
}
# A check of the key's operation also passes on a grant of one of these (Kafka's rules:
# CREATE on the cluster creates any topic, ALTER on the cluster moves and elects any
# partition; twinlog's own: a topic's ALTER changed its settings before ALTER_CONFIGS
# was a word here). Followed transitively; the cluster's grants are on CLUSTER_NAME. A
# holder of ALTER on the cluster may grant itself anything (it administers the ACLs), so
# what it implies adds no power.
ALSO_ALLOWED_BY: dict[tuple[Resource, Operation], tuple[tuple[Resource, Operation], ...]] = {
    (Resource.TOPIC, Operation.CREATE): ((Resource.CLUSTER, Operation.CREATE),),
    (Resource.TOPIC, Operation.ALTER): ((Resource.CLUSTER, Operation.ALTER),),
    (Resource.TOPIC, Operation.ALTER_CONFIGS): ((Resource.TOPIC, Operation.ALTER),),
    (Resource.TOPIC, Operation.DESCRIBE_CONFIGS): (
        (Resource.TOPIC, Operation.ALTER_CONFIGS),
        (Resource.TOPIC, Operation.READ),  # twinlog's rule before the word existed here
        (Resource.TOPIC, Operation.WRITE),
    ),
}
# Kafka's rule: a principal that may use (or abort) a resource may also see it.
IMPLIES_DESCRIBE = {
    Resource.TOPIC: (
        Operation.DESCRIBE,
        Operation.READ,
        Operation.WRITE,
        Operation.DELETE,
        Operation.ALTER,
    ),
    Resource.TRANSACTIONAL_ID: (Operation.DESCRIBE, Operation.WRITE, Operation.ABORT),
    Resource.GROUP: (Operation.DESCRIBE, Operation.READ),
    Resource.CLUSTER: (Operation.DESCRIBE, Operation.ALTER),
}
# Internal topics hold what belongs to everyone (``__consumer_offsets``: every group's
# offsets), so a glob reaches them only when it names them: ``read *`` does not. Which
# topics are internal is the engine's one rule (``internal_topics.is_internal``).


# How ``twinlog acls add`` names each kind of resource.
ACLS_ADD_FLAGS = {
    Resource.TOPIC: "--topic ",
    Resource.TRANSACTIONAL_ID: "--transactional-id ",
    Resource.GROUP: "--group ",
    Resource.BROKER: "--broker ",
    Resource.CLUSTER: "--cluster",
}


def _acls_add_command(
    principal: Principal, operation: Operation, resource: Resource, name: str
) -> str:
    """The ``twinlog acls add`` that grants this one operation (on the cluster, by flag)."""
    flag = ACLS_ADD_FLAGS[resource]
    target = flag if resource is Resource.CLUSTER else flag + name
    return f"twinlog acls add --principal {principal.name} --operation {operation.value} {target}"


def resource_pattern(resource: Resource, name: str) -> str:
    """How a grant for exactly this resource is written in the ACL file."""
    return PREFIXES[resource] + name


@dataclass(frozen=True)
class Principal:
    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Grant:
    principal: str
    operation: str
    pattern: str  # without its ``transactional-id:`` or ``group:`` prefix
    resource: Resource = Resource.TOPIC
    pattern_type: PatternType = PatternType.GLOB

    def allows(
        self,
        principal: Principal,
        operation: Operation,
        name: str,
        resource: Resource = Resource.TOPIC,
    ) -> bool:
        return (
            self.principal in ("*", principal.name)
            and self.operation in (ALL_OPERATIONS, operation.value)
            and self._covers(operation, resource)
            and self._matches(name, resource)
        )

    def _matches(self, name: str, resource: Resource) -> bool:
        if (
            resource is Resource.TOPIC
            and is_internal(name)
            and not self.pattern.startswith(INTERNAL_TOPIC_PREFIX)
        ):
            return False
        if self.pattern_type is PatternType.LITERAL:
            return self.pattern in ("*", name)
        if self.pattern_type is PatternType.PREFIXED:
            return name.startswith(self.pattern)
        return fnmatch.fnmatchcase(name, self.pattern)

    def _covers(self, operation: Operation, resource: Resource) -> bool:
        if self.resource is resource:
            return True
        # An abort grant has always named transactional ids without the prefix.
        return operation is Operation.ABORT and resource is Resource.TRANSACTIONAL_ID


def parse_grant(words: list[str], where: str) -> Grant:
    """One ACL line (``PRINCIPAL OPERATION PATTERN``), checked; ``where`` names the line."""
    if len(words) != 3:
        raise InvalidConfigError(f"{where}: expected 'PRINCIPAL OPERATION PATTERN'")
    principal, operation, pattern = words
    operation = operation.lower()
    resource = Resource.TOPIC
    for kind, prefix in PREFIXES.items():
        if prefix and pattern.startswith(prefix):
            resource, pattern = kind, pattern[len(prefix) :]
            break  # 'transactional-id:group:x' names the transactional id 'group:x'
    known = {item.value for item in Operation} | {ALL_OPERATIONS}
    if operation not in known:
        raise InvalidConfigError(
            f"{where}: operation {operation!r} is not one of {', '.join(sorted(known))}"
        )
    if operation == Operation.ABORT.value:
        resource = Resource.TRANSACTIONAL_ID  # with or without the prefix
    elif operation != ALL_OPERATIONS and Operation(operation) not in OPERATIONS_ON[resource]:
        fits = sorted(item.value for item in OPERATIONS_ON[resource])
        takers = [
            f"'{principal} {operation} {prefix}{_named(kind, pattern)}'"
            for kind, prefix in PREFIXES.items()
            if kind is not resource and Operation(operation) in OPERATIONS_ON[kind]
        ]
        hint = f"write {' or '.join(takers)}"
        raise InvalidConfigError(
            f"{where}: operation {operation!r} does not apply to {resource.value}s (those take "
            f"{', '.join(fits)}); {hint}"
        )
    if not pattern:
        raise InvalidConfigError(f"{where}: the pattern is empty; '*' matches every name")
    return Grant(principal, operation, pattern, resource)


def _named(resource: Resource, pattern: str) -> str:
    """The pattern as a grant on ``resource`` would write it: the cluster has one name."""
    return "*" if resource is Resource.CLUSTER or not pattern else pattern


def _lines(path: str | Path, what: str) -> list[tuple[int, list[str]]]:
    try:
        text = Path(path).read_text()
    except OSError as error:
        raise InvalidConfigError(f"cannot read {what} {path}: {error.strerror}") from None
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if words:
            found.append((number, words))
    return found


class TokenTable:
    """Bearer tokens to principals. Thread rule: immutable; any thread."""

    def __init__(self, tokens: Iterable[tuple[str, str]]) -> None:
        self._tokens = [(token.encode(), Principal(name)) for token, name in tokens]

    @classmethod
    def load(cls, path: str | Path) -> TokenTable:
        pairs = []
        for number, words in _lines(path, "tokens file"):
            if len(words) != 2:
                raise InvalidConfigError(
                    f"tokens file {path} line {number}: expected 'TOKEN PRINCIPAL', "
                    f"found {len(words)} words"
                )
            if len(words[0]) < TOKEN_BYTES_MIN:
                raise InvalidConfigError(
                    f"tokens file {path} line {number}: the token of {words[1]!r} is shorter "
                    f"than {TOKEN_BYTES_MIN} characters; generate one with "
                    "'python -c \"import secrets; print(secrets.token_hex(16))\"'"
                )
            pairs.append((words[0], words[1]))
        if not pairs:
            raise InvalidConfigError(f"tokens file {path} holds no token")
        return cls(pairs)

    def __len__(self) -> int:
        return len(self._tokens)

    def principal_of(self, token: str) -> Principal | None:
        presented = token.encode()
        found: Principal | None = None
        for known, principal in self._tokens:  # every token, whatever matched: constant time
            if hmac.compare_digest(known, presented):
                found = principal
        return found


@dataclass(frozen=True)
class IndexedGrants:
    """Grants, and the same by principal (``*`` under its own key): a check reads only the
    caller's and everyone's, not every grant (a store may hold thousands)."""

    grants: tuple[Grant, ...]
    by_principal: dict[str, tuple[Grant, ...]]

    @classmethod
    def of(cls, grants: Sequence[Grant]) -> IndexedGrants:
        by_principal: dict[str, list[Grant]] = {}
        for grant in grants:
            by_principal.setdefault(grant.principal, []).append(grant)
        return cls(tuple(grants), {key: tuple(held) for key, held in by_principal.items()})


class Acl:
    """Grants per principal. Thread rule: immutable; any thread (``acl_view.LiveAcl``, the
    file's grants with those made at run time, changes them as a whole, one attribute)."""

    def __init__(self, grants: Sequence[Grant]) -> None:
        self._indexed = IndexedGrants.of(grants)

    @property
    def grants(self) -> tuple[Grant, ...]:
        return self._indexed.grants

    @classmethod
    def load(cls, path: str | Path) -> Acl:
        return cls(
            [
                parse_grant(words, f"ACL file {path} line {number}")
                for number, words in _lines(path, "ACL file")
            ]
        )

    def allows(
        self,
        principal: Principal,
        operation: Operation,
        name: str,
        resource: Resource = Resource.TOPIC,
    ) -> bool:
        by_principal = self._indexed.by_principal
        for key in (principal.name, "*"):
            for grant in by_principal.get(key, ()):
                if grant.allows(principal, operation, name, resource):
                    return True
        for wider_resource, wider_operation in ALSO_ALLOWED_BY.get((resource, operation), ()):
            wider_name = CLUSTER_NAME if wider_resource is Resource.CLUSTER else name
            if self.allows(principal, wider_operation, wider_name, wider_resource):
                return True
        return False


class Guard:
    """Who is calling, and may they? ``None`` parts switch that check off.

    Thread rule: immutable; called from every server worker thread.
    """

    def __init__(self, tokens: TokenTable | None, acl: Acl | None, mutual_tls: bool) -> None:
        self.tokens = tokens
        self.acl = acl
        self.mutual_tls = mutual_tls

    def authenticate(
        self, metadata: Iterable[tuple[str, str | bytes]], peer_common_name: str | None
    ) -> Principal:
        if self.tokens is None:
            if self.mutual_tls and peer_common_name:
                return Principal(peer_common_name)
            return Principal(ANONYMOUS)
        header = None
        for key, value in metadata:
            if key == AUTHORIZATION_KEY:
                header = value.decode() if isinstance(value, bytes) else value
        if header is None:
            raise AuthenticationError(
                "this server requires a bearer token and the request carried none; "
                "pass token=... to the client (--token or TWINLOG_TOKEN on the command line)"
            )
        if not header.lower().startswith(BEARER_PREFIX):
            raise AuthenticationError(
                "the authorization metadata must read 'Bearer TOKEN'; pass token=... to the client"
            )
        principal = self.tokens.principal_of(header[len(BEARER_PREFIX) :].strip())
        if principal is None:
            raise AuthenticationError(
                "the bearer token is not known to this server (the token itself is not "
                "logged); check the token, or ask an operator to add it to the tokens file"
            )
        return principal

    def require(
        self,
        principal: Principal,
        operation: Operation,
        names: Iterable[str],
        resource: Resource = Resource.TOPIC,
    ) -> None:
        """Raise AuthorizationError unless ``principal`` may do ``operation`` on every name."""
        if self.acl is None:
            return
        for name in names:
            if not self.acl.allows(principal, operation, name, resource):
                audit(
                    "acl.denied",
                    principal=principal.name,
                    action=operation.value,
                    resource=resource.value,
                    name=name,
                )
                what = f"{name!r}" if resource is Resource.TOPIC else f"{resource.value} {name!r}"
                internal = resource is Resource.TOPIC and is_internal(name)
                raise AuthorizationError(
                    f"principal {principal.name!r} may not {operation.value} {what}; "
                    f"nothing was changed. Ask an operator for a grant in the ACL file "
                    f"('{principal.name} {operation.value} {resource_pattern(resource, name)}')"
                    f" or at run time ('{_acls_add_command(principal, operation, resource, name)}')"
                    + (
                        f"; {name} is internal: only a pattern starting "
                        f"'{INTERNAL_TOPIC_PREFIX}' matches it"
                        if internal
                        else ""
                    )
                )

    def may_describe(self, principal: Principal, name: str, resource: Resource) -> bool:
        """May ``principal`` see this transactional id (its transactions and producer),
        this group (named in a listed transaction), or this topic (at the Kafka listener)?"""
        if self.acl is None:
            return True
        return any(
            self.acl.allows(principal, operation, name, resource)
            for operation in IMPLIES_DESCRIBE[resource]
        )

    def may_describe_transactional_id(self, principal: Principal, transactional_id: str) -> bool:
        """May ``principal`` see this transactional id's transactions and producer?"""
        return self.may_describe(principal, transactional_id, Resource.TRANSACTIONAL_ID)
