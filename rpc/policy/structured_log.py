"""Log lines that carry fields: ``message key=value ...`` for people, the fields for machines.

A line logged with ``log_event(logger, level, "topic.create", principal="alice")``
reads ``topic.create principal=alice`` under any formatter, and keeps its fields on
the record (``record.fields``), so that ``twinlog serve --log-format json``
(``twinlog.rpc.server.log_format``) writes them as JSON keys instead.

Values are quoted when they hold spaces, quotes or ``=``, so a line splits back into
its pairs (``shlex.split`` then ``partition("=")``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

FIELDS_ATTRIBUTE = "fields"


def format_value(value: object) -> str:
    text = "-" if value is None else str(value)
    if not text or any(character in text for character in ' "=\\\n\t'):
        escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'"{escaped}"'
    return text


def format_pairs(fields: Mapping[str, object]) -> str:
    return " ".join(f"{key}={format_value(value)}" for key, value in fields.items())


def log_event(logger: logging.Logger, level: int, event: str, /, **fields: Any) -> None:
    """One line: the event's name, then its fields as key=value pairs."""
    if not logger.isEnabledFor(level):
        return
    text = f"{event} {format_pairs(fields)}" if fields else event
    logger.log(level, "%s", text, extra={FIELDS_ATTRIBUTE: {"event": event, **fields}})
