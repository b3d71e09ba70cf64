"""Counts agree with their nouns in what people read."""

from __future__ import annotations

import pytest

from twinlog.engine.base.wording import agreeing, counted


@pytest.mark.parametrize(
    ("count", "noun", "plural", "expected"),
    [
        (0, "record", None, "0 records"),
        (1, "record", None, "1 record"),
        (2, "record", None, "2 records"),
        (1, "batch", "batches", "1 batch"),
        (3, "batch", "batches", "3 batches"),
        (1, "journal record", None, "1 journal record"),
    ],
)
def test_counted(count: int, noun: str, plural: str | None, expected: str) -> None:
    assert counted(count, noun, plural) == expected


def test_agreeing_gives_the_noun_alone_for_a_count_shown_apart() -> None:
    assert [agreeing(n, "broker") for n in (0, 1, 2)] == ["brokers", "broker", "brokers"]
    assert agreeing(3, "entry", "entries") == "entries"
