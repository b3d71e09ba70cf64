"""``consume --format text``: one line per record, laid out as kafka-console-consumer.sh's
DefaultMessageFormatter lays it out, under the same names:

    flag                 Kafka's property     prints
    --print-timestamp    print.timestamp      CreateTime:1767225600000
    --print-partition    print.partition      Partition:0
    --print-offset       print.offset         Offset:7
    --print-headers      print.headers        k1:v1,k2:v2 (NO_HEADERS when there are none)
    --print-key          print.key            the key
    (always)             print.value          the value
    --key-separator S    key.separator        between the columns (a tab)
    --headers-separator  headers.separator    between headers (,)
    --null-literal S     null.literal         a null key, value or header value (null)

Keys, values and header values are escaped text (``record_encoding``, control
characters included: one record is one line), or base64 with ``--encoding base64``.
Text output is for reading; ``--format json`` is the exact one (a value "null" and a
null value look alike here, as in Kafka).
"""

from __future__ import annotations

from dataclasses import dataclass

from twinlog.rpc.client import ConsumerRecord
from twinlog.rpc.client.record_encoding import encode_bytes

NO_HEADERS = "NO_HEADERS"
# twinlog's producers set the timestamp (batch_format: the timestamp-type bit is never set).
TIMESTAMP_TYPE = "CreateTime"

# kafka-console-consumer.sh --property NAME=VALUE: the flag each name sets.
KAFKA_PROPERTIES = {
    "print.timestamp": "print_timestamp",
    "print.partition": "print_partition",
    "print.offset": "print_offset",
    "print.headers": "print_headers",
    "print.key": "print_key",
    "print.value": "print_value",
    "key.separator": "key_separator",
    "headers.separator": "headers_separator",
    "null.literal": "null_literal",
}
BOOLEAN_PROPERTIES = {"print_timestamp", "print_partition", "print_offset", "print_headers"} | {
    "print_key",
    "print_value",
}


@dataclass
class TextLayout:
    print_timestamp: bool = False
    print_partition: bool = False
    print_offset: bool = False
    print_headers: bool = False
    print_key: bool = False
    print_value: bool = True
    key_separator: str = "\t"
    headers_separator: str = ","
    null_literal: str = "null"
    encoding: str = "text"

    def _bytes(self, data: bytes | None) -> str:
        text = encode_bytes(data, self.encoding, escape_controls=True)
        return self.null_literal if text is None else text

    def _headers(self, record: ConsumerRecord) -> str:
        if not record.headers:
            return NO_HEADERS
        return self.headers_separator.join(
            f"{self._bytes(key.encode())}:{self._bytes(value)}" for key, value in record.headers
        )

    def render(self, record: ConsumerRecord) -> str:
        columns = []
        if self.print_timestamp:
            columns.append(f"{TIMESTAMP_TYPE}:{record.timestamp_ms}")
        if self.print_partition:
            columns.append(f"Partition:{record.partition}")
        if self.print_offset:
            columns.append(f"Offset:{record.offset}")
        if self.print_headers:
            columns.append(self._headers(record))
        if self.print_key:
            columns.append(self._bytes(record.key))
        if self.print_value:
            columns.append(self._bytes(record.value))
        return self.key_separator.join(columns)


def apply_property(layout: TextLayout, assignment: tuple[str, str]) -> None:
    """Set a field from a Kafka property (``print.key=true``); ValueError if unknown."""
    name, value = assignment
    field = KAFKA_PROPERTIES.get(name)
    if field is None:
        raise ValueError(
            f"unknown --property {name!r}; known: {', '.join(sorted(KAFKA_PROPERTIES))}"
        )
    if field not in BOOLEAN_PROPERTIES:
        setattr(layout, field, value)
    elif value.lower() in ("true", "false"):
        setattr(layout, field, value.lower() == "true")
    else:
        raise ValueError(f"--property {name} takes true or false, not {value!r}")
