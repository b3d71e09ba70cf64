"""CreateAcls (API key 30), DescribeAcls (29) and DeleteAcls (31), v0-3, onto the broker's
grants (``twinlog.rpc.policy.acl_admin``): the ACL file's, which describe lists and
delete cannot remove, and the store's, which every broker of a cluster applies.

Kafka's model onto twinlog's, as ``docs/kafka-protocol.md`` tells it:

- resource types TOPIC, GROUP, TRANSACTIONAL_ID, CLUSTER (named ``kafka-cluster``);
  twinlog's broker grants and its ``abort`` operation have no Kafka name and are not
  described here (``twinlog acls list`` shows them);
- pattern types LITERAL (``*``: every name) and PREFIXED; filters also ANY and MATCH;
  an ACL file glob is described as Kafka would write it (``orders*`` PREFIXED ``orders``);
  one Kafka cannot write (``a?c``) is neither described nor matched by a Kafka filter;
- operations ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE where they apply
  (``auth.OPERATIONS_ON``); others (CLUSTER_ACTION, IDEMPOTENT_WRITE, the configs' and
  tokens') are checks twinlog does not make: refused with INVALID_REQUEST saying so;
- permission ALLOW only: twinlog grants, it does not deny (DENY is INVALID_REQUEST);
- host ``*`` only; principals ``User:NAME`` (twinlog's NAME), ``User:*`` every one.

CreateAcls and DeleteAcls need ALTER on the cluster, DescribeAcls DESCRIBE (ALTER implies
it), else CLUSTER_AUTHORIZATION_FAILED (audited); a server without ACLs answers
SECURITY_DISABLED, as Kafka without an authorizer. A DeleteAcls filter that matches an
ACL file grant lists it with INVALID_REQUEST (it stays), removing the store's beside it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import kafka.errors as kafka_errors
from kafka.protocol.admin import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)

from twinlog.engine.base.errors import InvalidConfigError, TwinlogError
from twinlog.rpc.kafka.access import authorize
from twinlog.rpc.kafka.context import KafkaContext
from twinlog.rpc.kafka.error_codes import INVALID_REQUEST, NONE, code_of
from twinlog.rpc.policy.acl_admin import (
    AclsDisabledError,
    acl_in_force,
    create_acls,
    delete_acls,
    file_grant_refusal,
    list_acls,
)
from twinlog.rpc.policy.acl_bindings import (
    AclFilter,
    PatternFilter,
    check_binding,
    kafka_form,
    kafka_nameable,
)
from twinlog.rpc.policy.acl_view import LiveAcl
from twinlog.rpc.policy.auth import (
    ALL_OPERATIONS,
    CLUSTER_NAME,
    Grant,
    Operation,
    PatternType,
    Resource,
)

SECURITY_DISABLED = kafka_errors.SecurityDisabledError.errno
# Kafka's codes (org.apache.kafka.common.resource and .acl), as kafka-python's enums.
RESOURCE_BY_CODE = {
    2: Resource.TOPIC,
    3: Resource.GROUP,
    4: Resource.CLUSTER,
    5: Resource.TRANSACTIONAL_ID,
}
CODE_OF_RESOURCE = {resource: code for code, resource in RESOURCE_BY_CODE.items()}
OPERATION_BY_CODE = {
    2: ALL_OPERATIONS,
    3: Operation.READ.value,
    4: Operation.WRITE.value,
    5: Operation.CREATE.value,
    6: Operation.DELETE.value,
    7: Operation.ALTER.value,
    8: Operation.DESCRIBE.value,
    10: Operation.DESCRIBE_CONFIGS.value,
    11: Operation.ALTER_CONFIGS.value,
    12: Operation.IDEMPOTENT_WRITE.value,
}
CODE_OF_OPERATION = {operation: code for code, operation in OPERATION_BY_CODE.items()}
# Kafka's operations no twinlog grant can mean, and why.
UNGRANTABLE_OPERATIONS = {
    9: "CLUSTER_ACTION is what brokers do among themselves; twinlog's brokers prove it with "
    "the cluster's own credential, never a grant: nothing to grant",
    13: "CREATE_TOKENS: twinlog has no delegation tokens: nothing to grant",
    14: "DESCRIBE_TOKENS: twinlog has no delegation tokens: nothing to grant",
}
PATTERN_BY_CODE = {
    1: PatternFilter.ANY,
    2: PatternFilter.MATCH,
    3: PatternFilter.LITERAL,
    4: PatternFilter.PREFIXED,
}
CODE_OF_PATTERN = {PatternType.LITERAL: 3, PatternType.PREFIXED: 4}
UNKNOWN, ANY, DENY, ALLOW = 0, 1, 2, 3  # permission types (and UNKNOWN, ANY of the others)
ANY_HOST = "*"
USER_PREFIX = "User:"

Created = CreateAclsResponse.AclCreationResult
DescribedResource = DescribeAclsResponse.DescribeAclsResource
Description = DescribedResource.AclDescription
FilterResult = DeleteAclsResponse.DeleteAclsFilterResult
MatchingAcl = FilterResult.DeleteAclsMatchingAcl


def _principal(grant: Grant) -> str:
    return USER_PREFIX + grant.principal


def _refusal(context: KafkaContext, operation: Operation) -> tuple[int, str] | None:
    """(code, message) unless the caller may administer ACLs and the server has them."""
    principal = context.connection.principal
    guard = context.guard
    if operation is Operation.DESCRIBE and guard.may_describe(
        principal, CLUSTER_NAME, Resource.CLUSTER
    ):
        code = NONE
    else:
        code = authorize(guard, principal, operation, [CLUSTER_NAME], Resource.CLUSTER)
    if code != NONE:
        return code, (
            f"principal {principal.name!r} may not {operation.value} the cluster's ACLs; ask "
            f"an operator for '{principal.name} {operation.value} cluster:*'"
        )
    try:
        acl_in_force(guard)
    except AclsDisabledError as error:
        return SECURITY_DISABLED, str(error)
    return None


def _live(context: KafkaContext) -> LiveAcl:
    return acl_in_force(context.guard)


def _grant_of_creation(creation: Any) -> Grant:
    """The grant a CreateAcls creation asks for; InvalidConfigError saying why not."""
    resource = RESOURCE_BY_CODE.get(creation.resource_type)
    if resource is None:
        raise InvalidConfigError(
            f"resource type {creation.resource_type} is not one twinlog has (TOPIC 2, GROUP 3, "
            "CLUSTER 4, TRANSACTIONAL_ID 5)"
        )
    operation = OPERATION_BY_CODE.get(creation.operation)
    if operation is None:
        why = UNGRANTABLE_OPERATIONS.get(creation.operation)
        raise InvalidConfigError(
            f"operation {why}" if why else f"operation {creation.operation} cannot be granted"
        )
    if creation.permission_type != ALLOW:
        raise InvalidConfigError(
            "twinlog grants only (permission ALLOW): it has no DENY, so a denial cannot be "
            "stored; remove the grant that allows it instead"
        )
    if creation.host != ANY_HOST:
        raise InvalidConfigError(
            f"host {creation.host!r}: twinlog's grants hold from every host; use '*'"
        )
    if not creation.principal.startswith(USER_PREFIX):
        raise InvalidConfigError(
            f"principal {creation.principal!r}: twinlog's principals are users, 'User:NAME'"
        )
    pattern = {3: PatternType.LITERAL, 4: PatternType.PREFIXED}.get(
        getattr(creation, "resource_pattern_type", 3)
    )
    if pattern is None:
        raise InvalidConfigError("a grant's pattern type is LITERAL (3) or PREFIXED (4)")
    return Grant(
        creation.principal[len(USER_PREFIX) :],
        operation,
        creation.resource_name,
        resource,
        pattern,
    )


def handle_create_acls(
    request: CreateAclsRequest, version: int, context: KafkaContext
) -> CreateAclsResponse:
    refusal = _refusal(context, Operation.ALTER)
    if refusal is not None:
        return CreateAclsResponse(
            version=version,
            throttle_time_ms=0,
            results=[
                Created(error_code=refusal[0], error_message=refusal[1]) for _ in request.creations
            ],
        )
    acl = _live(context)
    connection = context.connection
    results: list[Any] = []
    wanted: list[tuple[int, Grant]] = []
    for index, creation in enumerate(request.creations):
        try:
            wanted.append((index, check_binding(_grant_of_creation(creation))))
            results.append(Created(error_code=NONE, error_message=None))
        except InvalidConfigError as error:
            results.append(Created(error_code=INVALID_REQUEST, error_message=str(error)))
    if wanted:
        try:
            create_acls(
                acl, [grant for _, grant in wanted], connection.principal.name, connection.peer
            )
        except TwinlogError as error:
            for index, _ in wanted:
                results[index] = Created(
                    error_code=code_of(error, CreateAclsRequest.API_KEY), error_message=str(error)
                )
    return CreateAclsResponse(version=version, throttle_time_ms=0, results=results)


def _filter_of(item: Any) -> AclFilter | None:
    """The filter a DescribeAcls request or DeleteAcls filter asks for; None for one that
    matches nothing twinlog has (a DENY, a resource type or operation twinlog has not);
    InvalidConfigError for an UNKNOWN value, as Kafka refuses one."""
    pattern_code = getattr(item, "pattern_type_filter", 3)
    codes = (item.resource_type_filter, item.operation, item.permission_type, pattern_code)
    if UNKNOWN in codes:
        raise InvalidConfigError(
            "a filter's resource type, operation, permission and pattern type are never "
            "UNKNOWN (0); ANY (1) matches every one"
        )
    pattern = PATTERN_BY_CODE.get(pattern_code)
    if pattern is None:
        raise InvalidConfigError(f"pattern type {pattern_code} is not one Kafka has")
    principal = item.principal_filter
    if principal is not None:
        if not principal.startswith(USER_PREFIX):
            return None
        principal = principal[len(USER_PREFIX) :]
    if item.host_filter not in (None, ANY_HOST) or item.permission_type == DENY:
        return None
    resource = None
    if item.resource_type_filter != ANY:
        resource = RESOURCE_BY_CODE.get(item.resource_type_filter)
        if resource is None:
            return None
    operation = None
    if item.operation != ANY:
        operation = OPERATION_BY_CODE.get(item.operation)
        if operation is None:
            return None
    return AclFilter(
        principal, operation, resource, item.resource_name_filter, pattern, kafka_only=True
    )


def _described(grants: Iterable[Grant]) -> list[Any]:
    """The grants Kafka can name, by resource pattern."""
    by_pattern: dict[tuple[int, str, int], list[Any]] = {}
    for grant in grants:
        form = kafka_form(grant)
        if form is None or not kafka_nameable(grant):
            continue
        key = (CODE_OF_RESOURCE[grant.resource], form[1], CODE_OF_PATTERN[form[0]])
        description = Description(
            principal=_principal(grant),
            host=ANY_HOST,
            operation=CODE_OF_OPERATION[grant.operation],
            permission_type=ALLOW,
        )
        if description not in by_pattern.setdefault(key, []):
            by_pattern[key].append(description)
    return [
        DescribedResource(resource_type=kind, resource_name=name, pattern_type=pattern, acls=acls)
        for (kind, name, pattern), acls in by_pattern.items()
    ]


def handle_describe_acls(
    request: DescribeAclsRequest, version: int, context: KafkaContext
) -> DescribeAclsResponse:
    def answer(code: int, message: str | None, resources: list[Any]) -> DescribeAclsResponse:
        return DescribeAclsResponse(
            version=version,
            throttle_time_ms=0,
            error_code=code,
            error_message=message,
            resources=resources,
        )

    refusal = _refusal(context, Operation.DESCRIBE)
    if refusal is not None:
        return answer(*refusal, [])
    try:
        filter_ = _filter_of(request)
    except InvalidConfigError as error:
        return answer(INVALID_REQUEST, str(error), [])
    if filter_ is None:
        return answer(NONE, None, [])
    listed = list_acls(_live(context), filter_)
    return answer(NONE, None, _described(item.grant for item in listed))


def _matching_acl(grant: Grant, code: int, message: str | None) -> Any:
    form = kafka_form(grant)
    pattern, name = form if form is not None else (PatternType.LITERAL, grant.pattern)
    return MatchingAcl(
        error_code=code,
        error_message=message,
        resource_type=CODE_OF_RESOURCE[grant.resource],
        resource_name=name,
        pattern_type=CODE_OF_PATTERN[pattern],
        principal=_principal(grant),
        host=ANY_HOST,
        operation=CODE_OF_OPERATION[grant.operation],
        permission_type=ALLOW,
    )


def handle_delete_acls(
    request: DeleteAclsRequest, version: int, context: KafkaContext
) -> DeleteAclsResponse:
    def result(code: int, message: str | None, matching: list[Any]) -> Any:
        return FilterResult(error_code=code, error_message=message, matching_acls=matching)

    refusal = _refusal(context, Operation.ALTER)
    if refusal is not None:
        results = [result(*refusal, []) for _ in request.filters]
        return DeleteAclsResponse(version=version, throttle_time_ms=0, filter_results=results)
    acl = _live(context)
    filters: list[AclFilter] = []
    problems: dict[int, str] = {}
    for index, item in enumerate(request.filters):
        try:
            found = _filter_of(item)
        except InvalidConfigError as error:
            problems[index] = str(error)
            continue
        if found is not None:
            filters.append(found)
        else:
            problems[index] = ""  # matches nothing: answered with no ACL
    connection = context.connection
    try:
        deleted = iter(delete_acls(acl, filters, connection.principal.name, connection.peer))
    except TwinlogError as error:
        code = code_of(error, DeleteAclsRequest.API_KEY)
        results = [result(code, str(error), []) for _ in request.filters]
        return DeleteAclsResponse(version=version, throttle_time_ms=0, filter_results=results)
    results = []
    for index in range(len(request.filters)):
        if index in problems:
            message = problems[index]
            results.append(result(INVALID_REQUEST if message else NONE, message or None, []))
            continue
        outcome = next(deleted)
        matching = [_matching_acl(grant, NONE, None) for grant in outcome.removed]
        matching += [
            _matching_acl(grant, INVALID_REQUEST, file_grant_refusal(acl, grant))
            for grant in outcome.from_file
        ]
        results.append(result(NONE, None, matching))
    return DeleteAclsResponse(version=version, throttle_time_ms=0, filter_results=results)
