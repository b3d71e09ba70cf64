"""The one error table: a row per engine error class holding its gRPC status and its Kafka
code, the lookups derived from it, docs/errors.md showing it, and the gRPC door sending it.
(The Kafka door: tests/rpc/kafka/test_error_codes.py.)"""

from __future__ import annotations

import inspect
import re
from collections import Counter
from pathlib import Path

import grpc
import kafka.errors
import pytest
from rpc_fakes import fake_server

from twinlog.engine.base import errors
from twinlog.engine.base.errors import TwinlogError
from twinlog.rpc.generated.twinlog.v1 import admin_pb2, admin_pb2_grpc
from twinlog.rpc.wire.error_table import (
    ERROR_CLASSES_BY_NAME,
    ERROR_TABLE,
    ROW_OF_ERROR,
    ErrorRow,
    KafkaCode,
    kafka_code_of,
    row_of,
    status_of,
)
from twinlog.rpc.wire.errors import NAME_KEY

DOCS = Path(__file__).resolve().parents[3] / "docs" / "errors.md"
# kafka-python keeps a few of Kafka's older names for the same numbers.
KAFKA_PYTHON_NAMES = {
    KafkaCode.UNKNOWN_SERVER_ERROR: "UNKNOWN",
    KafkaCode.NOT_LEADER_OR_FOLLOWER: "NOT_LEADER_FOR_PARTITION",
    KafkaCode.MESSAGE_TOO_LARGE: "MESSAGE_SIZE_TOO_LARGE",
}


def _engine_error_classes() -> set[type[TwinlogError]]:
    """Every error class of the engine's errors module (what a broker can raise)."""
    return {
        cls
        for _, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, TwinlogError) and cls.__module__ == errors.__name__
    }


def _rows_by_name() -> dict[str, ErrorRow]:
    return {row.error.__name__: row for row in ERROR_TABLE}


def test_every_engine_error_class_has_one_row() -> None:
    classes = _engine_error_classes()
    assert len(classes) > 40
    listed = [row.error for row in ERROR_TABLE]
    twice = [cls.__name__ for cls, count in Counter(listed).items() if count > 1]
    assert not twice, f"listed twice in ERROR_TABLE: {twice}"
    missing = sorted(cls.__name__ for cls in classes - set(listed))
    assert not missing, f"add a row to twinlog.rpc.wire.error_table.ERROR_TABLE for {missing}"
    strangers = sorted(cls.__name__ for cls in set(listed) - classes)
    assert not strangers, (
        f"ERROR_TABLE has rows for classes that are not engine errors: {strangers}"
    )
    assert len(ERROR_CLASSES_BY_NAME) == len(ERROR_TABLE)  # no two classes share a name


@pytest.mark.parametrize("row", ERROR_TABLE, ids=lambda row: row.error.__name__)
def test_every_row_holds_a_grpc_status_and_a_kafka_code(row: ErrorRow) -> None:
    assert isinstance(row.status, grpc.StatusCode) and row.status is not grpc.StatusCode.OK
    assert isinstance(row.kafka_code, KafkaCode)


def test_the_kafka_codes_are_kafka_s_numbers_and_names() -> None:
    by_number = {cls.errno: cls for cls in kafka.errors.kafka_errors.values()}
    for code in KafkaCode:
        assert code in by_number, f"{code.name} = {int(code)} is no Kafka error code"
        expected = KAFKA_PYTHON_NAMES.get(code, code.name)
        assert by_number[code].message == expected, f"{int(code)} is {by_number[code].message}"
    unused = set(KafkaCode) - {row.kafka_code for row in ERROR_TABLE}
    assert not unused, f"no row says {sorted(code.name for code in unused)}"


def test_retriable_classes_travel_as_retriable_kafka_codes() -> None:
    by_number = {cls.errno: cls for cls in kafka.errors.kafka_errors.values()}
    for row in ERROR_TABLE:
        if row.error.retriable:
            kafka_class = by_number[row.kafka_code]
            assert kafka_class.retriable, f"{row.error.__name__} -> {kafka_class.__name__}"


def test_both_lookups_give_each_row_and_a_subclass_its_base_s_row() -> None:
    for row in ERROR_TABLE:
        assert row_of(row.error) is ROW_OF_ERROR[row.error] is row
        assert status_of(row.error) is row.status
        assert kafka_code_of(row.error) is row.kafka_code
        assert ERROR_CLASSES_BY_NAME[row.error.__name__] is row.error

    class Special(errors.NotCoordinatorError):
        pass

    assert row_of(Special) is ROW_OF_ERROR[errors.NotCoordinatorError]
    assert status_of(Special) is grpc.StatusCode.UNAVAILABLE
    assert kafka_code_of(Special) is KafkaCode.NOT_COORDINATOR


def test_docs_give_each_class_its_row() -> None:
    # | `Name` | kind | STATUS | KAFKA_NAME (number) | when raised | what to do |
    pattern = re.compile(r"^\| `(\w+)` \| [a-z-]+ \| ([A-Z_]+) \| ([A-Z_]+) \((-?\d+)\) \|")
    documented = {
        match.group(1): (match.group(2), match.group(3), int(match.group(4)))
        for match in map(pattern.match, DOCS.read_text().splitlines())
        if match
    }
    for name, row in _rows_by_name().items():
        expected = (row.status.name, row.kafka_code.name, int(row.kafka_code))
        assert documented.get(name) == expected, f"docs/errors.md's row of {name}"


def _refusal(call: object, request: object) -> tuple[grpc.StatusCode, str | None]:
    with pytest.raises(grpc.RpcError) as refused:
        call(request, timeout=10)  # type: ignore[operator]
    error = refused.value
    return error.code(), dict(error.trailing_metadata() or ()).get(NAME_KEY)  # type: ignore[attr-defined]


def test_the_grpc_door_sends_each_class_s_status() -> None:
    with fake_server() as (_broker, address), grpc.insecure_channel(address) as channel:
        admin = admin_pb2_grpc.AdministrationStub(channel)
        admin.CreateTopic(admin_pb2.CreateTopicRequest(name="taken"), timeout=10)
        refusals = {
            errors.TopicExistsError: _refusal(
                admin.CreateTopic, admin_pb2.CreateTopicRequest(name="taken")
            ),
            errors.UnknownTopicOrPartitionError: _refusal(
                admin.DescribeTopic, admin_pb2.DescribeTopicRequest(name="missing")
            ),
        }
    for cls, (code, name) in refusals.items():
        assert (code, name) == (status_of(cls), cls.__name__)
