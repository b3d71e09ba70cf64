"""Every engine error survives the trip through a gRPC status and its metadata (the
status of each class is the one error table's: test_error_table.py)."""

from __future__ import annotations

import grpc
import pytest

from twinlog.engine.base import errors
from twinlog.engine.base.errors import TwinlogError, all_error_classes
from twinlog.rpc.wire.error_table import status_of
from twinlog.rpc.wire.errors import describe, error_from_status


def _broker_errors() -> list[type[TwinlogError]]:
    # Errors the broker can raise live in twinlog.engine.base.errors; others (the Spark
    # connector's option errors, say) are raised in the caller's process and never cross
    # the wire. Which of those are loaded depends on what the session imported first.
    return [cls for cls in all_error_classes() if cls.__module__ == errors.__name__]


def _sample(cls: type[TwinlogError]) -> TwinlogError:
    if cls is errors.OffsetOutOfRangeError:
        return cls("offset 9 is past the end 5; seek to 5", 0, 5)  # type: ignore[call-arg]
    if cls is errors.CorruptLogError:
        return cls("bad batch at 40", "/data/logs/t-0/0.log", 40)  # type: ignore[call-arg]
    if cls is errors.CorruptBatchError:
        return cls("crc mismatch: expected 1, found 2")
    return cls(f"{cls.__name__} happened; do the thing")


@pytest.mark.parametrize("cls", _broker_errors(), ids=lambda cls: cls.__name__)
def test_round_trip_through_status_and_metadata(cls: type[TwinlogError]) -> None:
    original = _sample(cls)
    description = describe(original)
    assert description.code == status_of(cls)
    rebuilt = error_from_status(
        description.code, description.message, dict(description.trailing_metadata())
    )
    assert type(rebuilt) is cls
    assert str(rebuilt) == str(original)
    assert rebuilt.retriable == cls.retriable
    for key, value in vars(original).items():
        assert getattr(rebuilt, key) == value


def test_unexpected_exception_is_internal_and_says_where_to_look() -> None:
    description = describe(KeyError("boom"))
    assert description.code == grpc.StatusCode.INTERNAL
    assert "server log" in description.message
    rebuilt = error_from_status(
        description.code, description.message, dict(description.trailing_metadata())
    )
    assert type(rebuilt) is TwinlogError and not rebuilt.retriable


def test_subclass_not_in_table_travels_as_its_base() -> None:
    class Special(errors.DiskFullError):
        pass

    description = describe(Special("disk full on /data"))
    assert description.name == "DiskFullError"
    assert description.code == grpc.StatusCode.RESOURCE_EXHAUSTED


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (grpc.StatusCode.UNAVAILABLE, errors.BrokerUnavailableError),
        (grpc.StatusCode.DEADLINE_EXCEEDED, errors.RequestTimedOutError),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, errors.BatchTooLargeError),
        (grpc.StatusCode.UNIMPLEMENTED, TwinlogError),
    ],
)
def test_transport_statuses_without_metadata(
    code: grpc.StatusCode, expected: type[TwinlogError]
) -> None:
    rebuilt = error_from_status(code, "failed to connect", {})
    assert type(rebuilt) is expected
    assert code.name in str(rebuilt)


def test_unknown_error_name_keeps_server_retriable_flag() -> None:
    rebuilt = error_from_status(
        grpc.StatusCode.UNAVAILABLE,
        "a newer server's error",
        {"twinlog-error-name": "FutureError", "twinlog-error-retriable": "true"},
    )
    assert type(rebuilt) is TwinlogError and rebuilt.retriable


def test_a_call_the_server_cancelled_is_retriable_and_one_we_cancelled_is_not() -> None:
    by_server = error_from_status(grpc.StatusCode.CANCELLED, "CANCELLED", {})
    assert type(by_server) is errors.BrokerUnavailableError and by_server.retriable
    assert "may or may not have been applied" in str(by_server)
    by_us = error_from_status(grpc.StatusCode.CANCELLED, "Locally cancelled by application!", {})
    assert type(by_us) is TwinlogError and not by_us.retriable
