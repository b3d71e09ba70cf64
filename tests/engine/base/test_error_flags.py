"""Every error says what to do: retriable, abortable or fatal (at most one), and
docs/errors.md lists every class with the same verdict."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from twinlog.engine.base import errors
from twinlog.engine.base.errors import TwinlogError, all_error_classes

DOCS = Path(__file__).resolve().parents[3] / "docs" / "errors.md"
FLAGS = ("retriable", "abortable", "fatal")
# The "Every class" table: its header, and a row | `Name` | kind | STATUS | CODE (n) | when | what |
HEADER = "| Class | Kind | gRPC status | Kafka code | When raised | What to do |"
ROW = re.compile(
    r"^\| `(\w+)` \| (retriable|abortable|fatal|-) \| ([A-Z_]+) \| ([A-Z_]+ \(-?\d+\))"
    r" \| ([^|]+) \| ([^|]+) \|$"
)


def engine_error_classes() -> list[type[TwinlogError]]:
    return [cls for cls in all_error_classes() if cls.__module__ == errors.__name__]


def kind_of(flagged: TwinlogError | type[TwinlogError]) -> str:
    set_flags = [flag for flag in FLAGS if getattr(flagged, flag)]
    assert len(set_flags) <= 1, f"{flagged} is {' and '.join(set_flags)}: at most one may be"
    return set_flags[0] if set_flags else "-"


def documented_rows() -> dict[str, tuple[str, str, str, str, str]]:
    """The "Every class" table of docs/errors.md by class: kind, status, Kafka code, when, what."""
    lines = DOCS.read_text().splitlines()
    assert HEADER in lines, f"{DOCS.name}'s table of every class no longer has the columns {HEADER}"
    rows: dict[str, tuple[str, str, str, str, str]] = {}
    for line in lines[lines.index(HEADER) + 2 :]:
        if not line.startswith("|"):
            break
        match = ROW.match(line)
        assert match, f"a row of {DOCS.name}'s table that does not have its columns: {line}"
        name, kind, status, kafka_code, when, what = match.groups()
        assert name not in rows, f"{name} is listed twice in {DOCS.name}"
        rows[name] = (kind, status, kafka_code, when, what)
    return rows


@pytest.mark.parametrize("cls", all_error_classes(), ids=lambda cls: cls.__name__)
def test_every_class_has_three_bool_flags_and_at_most_one_is_true(
    cls: type[TwinlogError],
) -> None:
    for flag in FLAGS:
        assert isinstance(getattr(cls, flag), bool), (cls.__name__, flag)
    kind_of(cls)


def test_the_deliberate_choices() -> None:
    # As Kafka's clients: fencing ends the producer, a refused batch ends the transaction.
    assert kind_of(errors.ProducerFencedError) == "fatal"
    assert kind_of(errors.AuthenticationError) == "fatal"
    assert kind_of(errors.UnknownProducerIdError) == "fatal"
    assert kind_of(errors.OutOfOrderSequenceError) == "abortable"
    assert kind_of(errors.TransactionDataMissingError) == "abortable"
    assert kind_of(errors.InvalidTxnStateError) == "abortable"
    assert kind_of(errors.AuthorizationError) == "abortable"
    assert kind_of(errors.RequestTimedOutError) == "retriable"
    assert kind_of(errors.BrokerUnavailableError) == "retriable"
    # Raised by send() before queuing: the transaction is untouched, unlike its base.
    assert kind_of(errors.BatchTooLargeError) == "abortable"
    assert kind_of(errors.RecordTooLargeError) == "-"
    assert kind_of(TwinlogError) == "-"


def test_classify_sets_one_instance_and_not_its_class() -> None:
    timed_out = errors.RequestTimedOutError("no answer")
    assert timed_out.classify(abortable=True) is timed_out
    assert (timed_out.retriable, timed_out.abortable, timed_out.fatal) == (False, True, False)
    assert timed_out.txn_requires_abort()
    assert errors.RequestTimedOutError.retriable and not errors.RequestTimedOutError.abortable
    assert kind_of(errors.RequestTimedOutError("another")) == "retriable"
    out_of_order = errors.InvalidTxnStateError("begin before init").classify()
    assert kind_of(out_of_order) == "-" and not out_of_order.txn_requires_abort()


def test_classify_refuses_two_flags() -> None:
    with pytest.raises(ValueError, match="at most one"):
        TwinlogError("both").classify(retriable=True, fatal=True)


def test_docs_list_every_class_with_its_kind_and_what_to_do() -> None:
    rows = documented_rows()
    names = {cls.__name__ for cls in engine_error_classes()}
    assert len(names) > 20
    missing = sorted(names - set(rows))
    assert not missing, f"add these to the table in docs/errors.md: {missing}"
    assert not sorted(set(rows) - names), "docs/errors.md lists classes that do not exist"
    for cls in engine_error_classes():
        kind, _status, _kafka_code, when, what = rows[cls.__name__]
        assert kind == kind_of(cls), f"docs/errors.md says {cls.__name__} is {kind}"
        assert len(when) > 10 and len(what) > 5, cls.__name__
