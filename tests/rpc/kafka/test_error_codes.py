"""The Kafka listener says each engine error as the one error table's row has it (rows for
every class: tests/rpc/wire/test_error_table.py), and Kafka's exceptions by API."""

from __future__ import annotations

from typing import Any

import kafka.errors
from kafka.protocol.admin import (
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)

from twinlog.engine.base import errors
from twinlog.rpc.kafka.error_codes import code_of
from twinlog.rpc.wire.error_table import kafka_code_of

CREATE_TOPICS_VERSION = 5
DELETE_TOPICS_VERSION = 5


def test_a_fenced_producer_is_told_so_in_each_api_s_words() -> None:
    fenced = errors.ProducerFencedError("fenced")
    assert code_of(fenced) == kafka.errors.ProducerFencedError.errno
    assert code_of(fenced, 0) == kafka.errors.InvalidProducerEpochError.errno  # Produce
    assert code_of(ValueError("not ours")) == kafka.errors.UnknownError.errno


def test_a_class_without_an_exception_is_said_as_its_row() -> None:
    class Special(errors.NotEnoughReplicasError):
        pass

    for api_key in (None, 0, 9, 10, 22):
        assert code_of(Special("few"), api_key) == kafka_code_of(errors.NotEnoughReplicasError)


def _create(raw: Any, name: str) -> Any:
    request = CreateTopicsRequest(
        topics=[
            CreateTopicsRequest.CreatableTopic(
                name=name, num_partitions=1, replication_factor=-1, assignments=[], configs=[]
            )
        ],
        timeout_ms=10_000,
        validate_only=False,
    )
    return raw.call(request, CreateTopicsResponse, CREATE_TOPICS_VERSION).topics[0]


def _delete(raw: Any, name: str) -> Any:
    request = DeleteTopicsRequest(topic_names=[name], timeout_ms=10_000)
    return raw.call(request, DeleteTopicsResponse, DELETE_TOPICS_VERSION).responses[0]


def test_the_kafka_door_sends_each_class_s_code(kafka_server: Any, raw: Any) -> None:
    topic = kafka_server.topic()
    answers = {
        errors.TopicExistsError: _create(raw, topic),
        errors.UnknownTopicOrPartitionError: _delete(raw, f"{topic}-missing"),
    }
    for cls, answer in answers.items():
        assert answer.error_code == kafka_code_of(cls), f"{cls.__name__}: {answer}"
        assert answer.error_message, cls.__name__
