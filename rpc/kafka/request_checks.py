"""What the codec decodes but Kafka's schemas forbid: a null where a field is not nullable
in the request's version (a length of -1 in a non-nullable string or array). Kafka's
broker refuses such a request as malformed; so does the listener (``dispatch`` closes
the connection, with a log line naming the field), before any handler sees it."""

from __future__ import annotations

from typing import Any

# The types whose null is a length of -1 on the wire. (The codec also reads an all-zero
# uuid as None: that is a value, not a null.)
NULL_BY_LENGTH_TYPES = frozenset({"string", "bytes"})


def null_where_forbidden(message: Any, version: int, path: str = "") -> str | None:
    """The dotted path of the first such field of ``message`` (a decoded request or one of
    its structs), or None."""
    for name, field in type(message).fields.items():
        if not field.for_version_q(version):
            continue
        value = getattr(message, name)
        where = f"{path}{name}"
        if value is None:
            nulled = field.type_str in NULL_BY_LENGTH_TYPES or field.is_array()
            if nulled and not field.nullable_for_version_q(version):
                return where
            continue
        if field.is_struct():
            found = null_where_forbidden(value, version, f"{where}.")
            if found is not None:
                return found
        elif field.is_array():
            for index, item in enumerate(value):
                if item is None:
                    return f"{where}[{index}]"
                if field.is_struct_array():
                    found = null_where_forbidden(item, version, f"{where}[{index}].")
                    if found is not None:
                        return found
    return None
