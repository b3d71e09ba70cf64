"""The one table from engine errors to Kafka error codes covers every engine error class."""

from __future__ import annotations

import inspect

import kafka.errors

from twinlog.engine.base import errors
from twinlog.engine.base.errors import TwinlogError
from twinlog.rpc.kafka.error_codes import CODE_OF_ERROR, code_of


def test_every_engine_error_class_has_a_kafka_code() -> None:
    classes = {
        cls
        for _, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, TwinlogError)
    }
    assert classes - set(CODE_OF_ERROR) == set()


def test_retriable_engine_errors_travel_as_retriable_codes() -> None:
    by_code = {cls.errno: cls for cls in kafka.errors.kafka_errors.values()}
    for cls, code in CODE_OF_ERROR.items():
        if cls.retriable:
            assert by_code[code].retriable, f"{cls.__name__} -> {by_code[code].__name__}"


def test_a_fenced_producer_is_told_so_in_each_api_s_words() -> None:
    fenced = errors.ProducerFencedError("fenced")
    assert code_of(fenced) == kafka.errors.ProducerFencedError.errno
    assert code_of(fenced, 0) == kafka.errors.InvalidProducerEpochError.errno  # Produce
    assert code_of(ValueError("not ours")) == kafka.errors.UnknownError.errno
