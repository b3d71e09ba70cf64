"""DescribeUserScramCredentials (API key 50) and AlterUserScramCredentials (API key 51),
v0, onto the broker's SCRAM credential store (``twinlog.rpc.policy.scram_store``), the one
``twinlog users`` edits and SCRAM logins read.

As Kafka: describing needs DESCRIBE on the cluster (ALTER implies it), altering ALTER on
the cluster (``cluster:*`` in the ACL file), else CLUSTER_AUTHORIZATION_FAILED. An
upsertion carries the salt and SaltedPassword the client computed (never the password);
the broker keeps StoredKey and ServerKey. Per user: RESOURCE_NOT_FOUND for a user without
credentials (describe) or a deletion of a credential it lacks, UNSUPPORTED_SASL_MECHANISM
for a mechanism other than SCRAM-SHA-256 (1) and SCRAM-SHA-512 (2),
UNACCEPTABLE_CREDENTIAL for an empty name, iterations outside 4096..16384 or a salt shorter
than 8 bytes, DUPLICATE_RESOURCE for a user named twice (twice with one mechanism, when
altering). A change is audited (``scram.set``, ``scram.delete``), never its secrets.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from kafka.protocol.admin.users import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)

from twinlog.rpc.kafka.access import authorize
from twinlog.rpc.kafka.context import KafkaContext
from twinlog.rpc.kafka.error_codes import (
    DUPLICATE_RESOURCE,
    NONE,
    RESOURCE_NOT_FOUND,
    UNACCEPTABLE_CREDENTIAL,
    UNKNOWN_SERVER_ERROR,
    UNSUPPORTED_SASL_MECHANISM,
)
from twinlog.rpc.policy.audit import audited
from twinlog.rpc.policy.auth import CLUSTER_NAME, Operation, Resource
from twinlog.rpc.policy.scram import SCRAM_SHA_256, SCRAM_SHA_512, ScramCredential
from twinlog.rpc.policy.scram_store import ScramStore, scram_store_of

# Kafka's ScramMechanism type codes.
MECHANISM_BY_CODE = {1: SCRAM_SHA_256, 2: SCRAM_SHA_512}
CODE_BY_MECHANISM = {name: code for code, name in MECHANISM_BY_CODE.items()}
NO_STORE = "this broker keeps no SCRAM credentials (it has no data directory)"

Described = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
Info = Described.CredentialInfo
Altered = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult


def handle_describe_user_scram_credentials(
    request: DescribeUserScramCredentialsRequest, version: int, context: KafkaContext
) -> DescribeUserScramCredentialsResponse:
    principal = context.connection.principal
    code = NONE
    if not context.guard.may_describe(principal, CLUSTER_NAME, Resource.CLUSTER):  # ALTER too
        code = authorize(
            context.guard, principal, Operation.DESCRIBE, [CLUSTER_NAME], Resource.CLUSTER
        )
    store = scram_store_of(context.broker)
    if code != NONE or store is None:
        return DescribeUserScramCredentialsResponse(
            version=version,
            throttle_time_ms=0,
            error_code=code if code != NONE else UNKNOWN_SERVER_ERROR,
            error_message=(
                f"principal {principal.name!r} may not describe the cluster; ask an operator "
                f"for '{principal.name} describe cluster:*' in the ACL file"
                if code != NONE
                else NO_STORE
            ),
            results=[],
        )
    held = store.mechanisms()
    asked = [user.name for user in request.users] if request.users else sorted(held)
    counts = Counter(asked)
    results = []
    for name in dict.fromkeys(asked):
        if counts[name] > 1:
            results.append(_described(name, DUPLICATE_RESOURCE, "the user is named twice"))
        elif name not in held:
            results.append(
                _described(name, RESOURCE_NOT_FOUND, f"user {name!r} has no SCRAM credentials")
            )
        else:
            infos = [Info(mechanism=CODE_BY_MECHANISM[m], iterations=i) for m, i in held[name]]
            results.append(_described(name, NONE, None, infos))
    return DescribeUserScramCredentialsResponse(
        version=version, throttle_time_ms=0, error_code=NONE, error_message=None, results=results
    )


def _described(user: str, code: int, message: str | None, infos: Any = ()) -> Any:
    return Described(user=user, error_code=code, error_message=message, credential_infos=infos)


def handle_alter_user_scram_credentials(
    request: AlterUserScramCredentialsRequest, version: int, context: KafkaContext
) -> AlterUserScramCredentialsResponse:
    principal = context.connection.principal
    named = [item.name for item in (*request.deletions, *request.upsertions)]
    denied = authorize(context.guard, principal, Operation.ALTER, [CLUSTER_NAME], Resource.CLUSTER)
    store = scram_store_of(context.broker)
    refusal: tuple[int, str] | None = None
    if denied != NONE:
        refusal = (
            denied,
            f"principal {principal.name!r} may not alter the cluster's credentials; ask an "
            f"operator for '{principal.name} alter cluster:*' in the ACL file",
        )
    elif store is None:
        refusal = (UNKNOWN_SERVER_ERROR, NO_STORE)
    if refusal is not None:
        results = [_altered(name, *refusal) for name in dict.fromkeys(named)]
        return AlterUserScramCredentialsResponse(
            version=version, throttle_time_ms=0, results=results
        )
    assert store is not None
    pairs = Counter(
        (item.name, item.mechanism) for item in (*request.deletions, *request.upsertions)
    )
    problems: dict[str, tuple[int, str]] = {}
    for item in (*request.deletions, *request.upsertions):
        problem = _problem(item, pairs)
        if problem is not None:
            problems.setdefault(item.name, problem)
    for item in request.deletions:
        mechanism = MECHANISM_BY_CODE.get(item.mechanism)
        if item.name in problems or mechanism is None:
            continue
        if not any(m == mechanism for m, _ in store.mechanisms().get(item.name, [])):
            problems[item.name] = (
                RESOURCE_NOT_FOUND,
                f"user {item.name!r} has no {mechanism} credential to delete",
            )
    for item in request.upsertions:
        if item.name in problems:
            continue
        try:
            credential = ScramCredential.from_salted_password(
                MECHANISM_BY_CODE[item.mechanism],
                bytes(item.salt),
                item.iterations,
                bytes(item.salted_password),
            )
        except ValueError as error:
            problems[item.name] = (UNACCEPTABLE_CREDENTIAL, str(error))
            continue
        _apply(context, store, item.name, credential)
    for item in request.deletions:
        if item.name not in problems:
            _delete(context, store, item.name, MECHANISM_BY_CODE[item.mechanism])
    results = [_altered(name, *problems.get(name, (NONE, None))) for name in dict.fromkeys(named)]
    return AlterUserScramCredentialsResponse(version=version, throttle_time_ms=0, results=results)


def _problem(item: Any, pairs: Counter[tuple[str, int]]) -> tuple[int, str] | None:
    if not item.name:
        return UNACCEPTABLE_CREDENTIAL, "a SCRAM user needs a name"
    if item.mechanism not in MECHANISM_BY_CODE:
        return (
            UNSUPPORTED_SASL_MECHANISM,
            f"mechanism {item.mechanism} is not SCRAM-SHA-256 (1) or SCRAM-SHA-512 (2)",
        )
    if pairs[(item.name, item.mechanism)] > 1:
        return (
            DUPLICATE_RESOURCE,
            f"user {item.name!r} is named twice for {MECHANISM_BY_CODE[item.mechanism]}",
        )
    return None


def _apply(
    context: KafkaContext, store: ScramStore, user: str, credential: ScramCredential
) -> None:
    connection = context.connection
    with audited(
        "scram.set",
        principal=connection.principal.name,
        peer=connection.peer,
        door="kafka",
        user=user,
        mechanism=credential.mechanism,
        iterations=credential.iterations,
    ):
        store.set(user, credential)


def _delete(context: KafkaContext, store: ScramStore, user: str, mechanism: str) -> None:
    connection = context.connection
    with audited(
        "scram.delete",
        principal=connection.principal.name,
        peer=connection.peer,
        door="kafka",
        user=user,
        mechanism=mechanism,
    ):
        store.delete(user, mechanism)


def _altered(user: str, code: int, message: str | None) -> Any:
    return Altered(user=user, error_code=code, error_message=message)
