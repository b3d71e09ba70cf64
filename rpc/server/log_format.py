"""How ``twinlog serve`` writes its log: ``--log-format text`` (default) or ``json``, on stderr.

text: ``2025-01-31 12:00:00.123 INFO    twinlog.audit: topic.create principal=ops ...``
json: one object per line, ``{"time": "2025-01-31T12:00:00.123Z", "level": "INFO",
"logger": "twinlog.audit", "message": "topic.create principal=ops ...", "event":
"topic.create", "principal": "ops", ...}``: the fields of a structured line
(``structured_log``) become keys; a traceback goes under ``exception``.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

from twinlog.rpc.policy.structured_log import FIELDS_ATTRIBUTE

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s.%(msecs)03d %(levelname)-7s %(name)s: %(message)s"
TEXT_DATE_FORMAT = "%Y-%m-%d %H:%M:%S"
RESERVED_KEYS = ("time", "level", "logger", "message", "exception")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        line: dict[str, Any] = {
            "time": f"{seconds}.{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, FIELDS_ATTRIBUTE, None)
        if isinstance(fields, dict):
            for key, value in fields.items():
                # a field never hides the line's own keys
                name = f"field_{key}" if key in RESERVED_KEYS else key
                line[name] = value if isinstance(value, int | float | bool) else str(value)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


def formatter_for(log_format: str) -> logging.Formatter:
    if log_format == "json":
        return JsonFormatter()
    if log_format == "text":
        return logging.Formatter(TEXT_FORMAT, TEXT_DATE_FORMAT)
    raise ValueError(f"log format {log_format!r} is not one of {', '.join(LOG_FORMATS)}")


def configure_server_logging(level: str = "INFO", log_format: str = "text") -> None:
    """Every logger to stderr, at ``level`` (one of LOG_LEVELS, any case)."""
    name = level.upper()
    if name not in LOG_LEVELS:
        raise ValueError(f"log level {level!r} is not one of {', '.join(LOG_LEVELS)}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter_for(log_format))
    logging.basicConfig(level=getattr(logging, name), handlers=[handler], force=True)
