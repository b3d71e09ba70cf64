"""DescribeConfigs of topics: each topic setting under Kafka's name, with its value and
whether the topic sets it (TOPIC_CONFIG) or takes the broker's default (DEFAULT_CONFIG),
as ``kafka-configs.sh --describe`` and Kafka UIs read them (``Broker.topic_settings``).

A topic is described to callers with DESCRIBE_CONFIGS on it (as Kafka asks; ALTER_CONFIGS,
and twinlog's READ and WRITE, imply it). Resources other than topics (brokers, broker loggers) are answered
INVALID_REQUEST naming what is served: the broker's settings are not Kafka's.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import DescribeConfigsRequest, DescribeConfigsResponse

from twinlog.engine.base.errors import TwinlogError
from twinlog.rpc.kafka.access import may
from twinlog.rpc.kafka.context import KafkaContext
from twinlog.rpc.kafka.error_codes import (
    INVALID_REQUEST,
    NONE,
    TOPIC_AUTHORIZATION_FAILED,
    code_of,
)
from twinlog.rpc.policy.auth import Operation, Resource

TOPIC_RESOURCE = 2  # Kafka's ConfigResource.Type.TOPIC
TOPIC_CONFIG_SOURCE = 1  # set on the topic (DYNAMIC_TOPIC_CONFIG)
DEFAULT_CONFIG_SOURCE = 5  # the broker's default
STRING_TYPE = 2  # Kafka's ConfigType.STRING (v3+): every value is given as text

Result = DescribeConfigsResponse.DescribeConfigsResult
Entry = Result.DescribeConfigsResourceResult


def _entry(name: str, value: str, set_on_topic: bool) -> Any:
    return Entry(
        name=name,
        value=value,
        read_only=False,
        is_default=not set_on_topic,  # v0
        config_source=TOPIC_CONFIG_SOURCE if set_on_topic else DEFAULT_CONFIG_SOURCE,
        is_sensitive=False,
        synonyms=[],
        config_type=STRING_TYPE,
        documentation=None,
    )


def _describe(context: KafkaContext, resource: Any) -> Any:
    name = resource.resource_name
    answer = {"resource_type": resource.resource_type, "resource_name": name, "configs": []}
    if resource.resource_type != TOPIC_RESOURCE:
        return Result(
            error_code=INVALID_REQUEST,
            error_message=f"resource type {resource.resource_type} is not described here: "
            "only topics (type 2) are",
            **answer,
        )
    if not may(
        context.guard,
        context.connection.principal,
        Operation.DESCRIBE_CONFIGS,
        name,
        Resource.TOPIC,
    ):
        return Result(
            error_code=TOPIC_AUTHORIZATION_FAILED,
            error_message=f"not authorized to describe topic {name}",
            **answer,
        )
    try:
        settings = context.broker.topic_settings(name)
    except TwinlogError as error:
        return Result(
            error_code=code_of(error, DescribeConfigsRequest.API_KEY),
            error_message=str(error),
            **answer,
        )
    wanted = resource.configuration_keys
    answer["configs"] = [
        _entry(key, value, set_on_topic)
        for key, value, set_on_topic in settings
        if wanted is None or key in wanted
    ]
    return Result(error_code=NONE, error_message=None, **answer)


def handle_describe_configs(
    request: DescribeConfigsRequest, version: int, context: KafkaContext
) -> DescribeConfigsResponse:
    results = [_describe(context, resource) for resource in request.resources]
    return DescribeConfigsResponse(version=version, throttle_time_ms=0, results=results)
