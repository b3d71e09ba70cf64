"""IncrementalAlterConfigs and AlterConfigs of topics, onto the broker's
``alter_topic_config`` (ALTER on the topic; Kafka asks ALTER_CONFIGS), as
``kafka-configs.sh --alter --entity-type topics`` and admin clients send them.

IncrementalAlterConfigs: SET (0) and DELETE (1) are served; APPEND (2) and SUBTRACT (3)
apply to list-valued settings, which no topic setting here is: INVALID_CONFIG. AlterConfigs
(the older, whole-replacement form) sets the settings given and returns every other one to
the broker's default, as Kafka's does. Resources other than topics: INVALID_REQUEST.
``validate_only`` checks the grant, the names and the values, and changes nothing.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

from twinlog.engine.base.errors import InvalidConfigError, TwinlogError
from twinlog.rpc.kafka.access import require
from twinlog.rpc.kafka.context import KafkaContext
from twinlog.rpc.kafka.describe_configs import TOPIC_RESOURCE
from twinlog.rpc.kafka.error_codes import INVALID_REQUEST, NONE, code_of
from twinlog.rpc.kafka.topics import audited_change
from twinlog.rpc.policy.auth import Operation

SET, DELETE = 0, 1  # Kafka's AlterConfigOp.OpType


def handle_incremental_alter_configs(
    request: IncrementalAlterConfigsRequest, version: int, context: KafkaContext
) -> IncrementalAlterConfigsResponse:
    answers = []
    for resource in request.resources:
        try:
            set_values: dict[str, str] = {}
            deleted: list[str] = []
            for entry in resource.configs:
                if entry.config_operation == SET and entry.value is not None:
                    set_values[entry.name] = entry.value
                elif entry.config_operation in (SET, DELETE):
                    deleted.append(entry.name)
                else:
                    raise InvalidConfigError(
                        f"{entry.name}: operation {entry.config_operation} (APPEND or SUBTRACT) "
                        "applies to list settings; no topic setting is one: use SET"
                    )
            answer = _alter(
                context, resource, set_values, deleted, request.validate_only, replace=False
            )
        except TwinlogError as error:
            answer = _answer(resource, error, IncrementalAlterConfigsRequest.API_KEY)
        answers.append(IncrementalAlterConfigsResponse.AlterConfigsResourceResponse(**answer))
    return IncrementalAlterConfigsResponse(version=version, throttle_time_ms=0, responses=answers)


def handle_alter_configs(
    request: AlterConfigsRequest, version: int, context: KafkaContext
) -> AlterConfigsResponse:
    answers = []
    for resource in request.resources:
        given = {entry.name: entry.value for entry in resource.configs if entry.value is not None}
        try:
            answer = _alter(context, resource, given, [], request.validate_only, replace=True)
        except TwinlogError as error:
            answer = _answer(resource, error, AlterConfigsRequest.API_KEY)
        answers.append(AlterConfigsResponse.AlterConfigsResourceResponse(**answer))
    return AlterConfigsResponse(version=version, throttle_time_ms=0, responses=answers)


def _alter(
    context: KafkaContext,
    resource: Any,
    set_values: dict[str, str],
    deleted: list[str],
    validate_only: bool,
    *,
    replace: bool,
) -> dict[str, Any]:
    name = resource.resource_name
    if resource.resource_type != TOPIC_RESOURCE:
        return {
            **_names(resource),
            "error_code": INVALID_REQUEST,
            "error_message": f"resource type {resource.resource_type} is not altered here: only "
            "topics (type 2) are",
        }
    require(context.guard, context.connection.principal, Operation.ALTER_CONFIGS, (name,))
    current = context.broker.describe_topic(name).config
    if replace:  # every setting not given goes back to the broker's default
        deleted = [key for key in current if key not in set_values]
    if validate_only:
        context.broker.alter_topic_config(name, set_values, deleted, validate_only=True)
    else:
        with audited_change(
            context, "topic.config", topic=name, set=",".join(sorted(set_values)),
            delete=",".join(deleted),
        ):  # fmt: skip
            context.broker.alter_topic_config(name, set_values, deleted)
    return {**_names(resource), "error_code": NONE, "error_message": None}


def _names(resource: Any) -> dict[str, Any]:
    return {"resource_type": resource.resource_type, "resource_name": resource.resource_name}


def _answer(resource: Any, error: TwinlogError, api_key: int) -> dict[str, Any]:
    return {**_names(resource), "error_code": code_of(error, api_key), "error_message": str(error)}
