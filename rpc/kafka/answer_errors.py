"""The errors an answer carries, by Kafka's names, for the metrics and the request log: its
top-level ``error_code`` and every topic's, partition's, group's or member's below it.

Where the codes are is read once per response class from its schema (the fields named
``error_code``, and the structs and arrays of structs that hold one), so an answer is walked
along those fields only: a Fetch's records are never touched. Names are kafka-python's
(``kafka.errors``: ``UNKNOWN_TOPIC_OR_PARTITION``, ...); a code it does not know is
``UNKNOWN_CODE``. The codes are the listener's own, never a client's, so the names are
bounded by Kafka's table.

Thread rule: the cache is filled by whichever thread meets a class first (a lost race only
builds the same tree twice); any thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kafka.errors as kafka_errors

ERROR_FIELD = "error_code"
UNKNOWN_CODE = "UNKNOWN_CODE"

# Per response class: (field name, subtree) pairs, the subtree None for an error code itself.
_Tree = tuple[tuple[str, Any], ...]
_trees: dict[type, _Tree] = {}


def error_names(answer: Any) -> tuple[str, ...]:
    """The distinct non-zero error codes in ``answer`` (a decoded response), by name, sorted."""
    answer_class = type(answer)
    tree = _trees.get(answer_class)
    if tree is None:
        tree = _trees[answer_class] = _tree(answer_class.fields)
    codes: set[int] = set()
    _collect(answer, tree, codes)
    return tuple(sorted({name_of(code) for code in codes}))


def name_of(code: int) -> str:
    error = kafka_errors.kafka_errors.get(code)
    return str(error.message) if error is not None else UNKNOWN_CODE


def _tree(fields: Mapping[str, Any]) -> _Tree:
    found: list[tuple[str, Any]] = []
    for name, field in fields.items():
        if name == ERROR_FIELD:
            found.append((name, None))
        elif field.is_struct() or field.is_struct_array():
            below = _tree(field.fields)
            if below:
                found.append((name, below))
    return tuple(found)


def _collect(value: Any, tree: _Tree, codes: set[int]) -> None:
    for name, below in tree:
        item = getattr(value, name, None)
        if item is None:
            continue
        if below is None:
            if item:
                codes.add(item)
        elif isinstance(item, list):
            for element in item:
                if element is not None:
                    _collect(element, below, codes)
        else:
            _collect(item, below, codes)
