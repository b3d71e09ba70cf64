"""The three flags of an error survive the trip back, as trailing metadata (unary calls)
and as the Error message of a stream; the server's verdict wins over the class."""

from __future__ import annotations

import grpc
import pytest

from twinlog.engine.base import errors
from twinlog.engine.base.errors import TwinlogError, all_error_classes
from twinlog.rpc.generated.twinlog.v1 import common_pb2
from twinlog.rpc.wire.errors import (
    ABORTABLE_KEY,
    FATAL_KEY,
    NAME_KEY,
    RETRIABLE_KEY,
    describe,
    error_from_proto,
    error_from_status,
)

FLAGS = ("retriable", "abortable", "fatal")


def _engine_errors() -> list[type[TwinlogError]]:
    return [cls for cls in all_error_classes() if cls.__module__ == errors.__name__]


def _flags(error: TwinlogError) -> tuple[bool, bool, bool]:
    return (error.retriable, error.abortable, error.fatal)


def _sample(cls: type[TwinlogError]) -> TwinlogError:
    error = cls.__new__(cls)
    Exception.__init__(error, f"{cls.__name__} happened")
    return error


def _through_metadata(error: TwinlogError) -> TwinlogError:
    description = describe(error)
    return error_from_status(
        description.code, description.message, dict(description.trailing_metadata())
    )


def _through_stream(error: TwinlogError) -> TwinlogError:
    sent = describe(error).to_proto().SerializeToString()
    return error_from_proto(common_pb2.Error.FromString(sent))


@pytest.mark.parametrize("cls", _engine_errors(), ids=lambda cls: cls.__name__)
@pytest.mark.parametrize("trip", [_through_metadata, _through_stream], ids=["unary", "stream"])
def test_every_class_keeps_its_three_flags(cls: type[TwinlogError], trip: object) -> None:
    original = _sample(cls)
    rebuilt = trip(original)  # type: ignore[operator]
    assert type(rebuilt) is cls
    assert str(rebuilt) == str(original)
    assert _flags(rebuilt) == _flags(original) == (cls.retriable, cls.abortable, cls.fatal)


@pytest.mark.parametrize("trip", [_through_metadata, _through_stream], ids=["unary", "stream"])
@pytest.mark.parametrize("kind", ["none", *FLAGS])
def test_an_instance_classified_on_the_server_arrives_classified(trip: object, kind: str) -> None:
    original = errors.RequestTimedOutError("the send timed out in a transaction")
    original.classify(**({} if kind == "none" else {kind: True}))
    rebuilt = trip(original)  # type: ignore[operator]
    assert type(rebuilt) is errors.RequestTimedOutError
    assert _flags(rebuilt) == _flags(original)
    assert not {"retriable", "abortable", "fatal"} & set(describe(original).attributes_json)


@pytest.mark.parametrize("flag", FLAGS)
def test_an_unknown_class_keeps_the_servers_verdict(flag: str) -> None:
    verdict = {f"twinlog-error-{each}": "true" if each == flag else "false" for each in FLAGS}
    rebuilt = error_from_status(
        grpc.StatusCode.FAILED_PRECONDITION,
        "a newer server's error",
        {NAME_KEY: "FutureError", **verdict},
    )
    assert type(rebuilt) is TwinlogError
    assert _flags(rebuilt) == tuple(each == flag for each in FLAGS)
    streamed = error_from_proto(
        common_pb2.Error(name="FutureError", message="newer", **{flag: True})
    )
    assert type(streamed) is TwinlogError
    assert _flags(streamed) == tuple(each == flag for each in FLAGS)


def test_an_older_server_without_the_new_flags_leaves_the_class_verdict() -> None:
    unary = error_from_status(
        grpc.StatusCode.FAILED_PRECONDITION,
        "fenced",
        {NAME_KEY: "ProducerFencedError", RETRIABLE_KEY: "false"},
    )
    assert unary.fatal and not unary.abortable
    streamed = error_from_proto(common_pb2.Error(name="OutOfOrderSequenceError", message="gap"))
    assert streamed.abortable and not streamed.fatal
    assert ABORTABLE_KEY != FATAL_KEY != RETRIABLE_KEY
