"""The client's timeout settings, with Kafka's names and meaning, and their checks.

``request_timeout_ms`` bounds one request, ``delivery_timeout_ms`` a record from
``send()`` to its success or failure, ``default_api_timeout_ms`` a call that takes no
timeout of its own. docs/timeouts.md lists which call each one bounds.
"""

from __future__ import annotations

from twinlog.engine.base.errors import InvalidConfigError

DELIVERY_TIMEOUT_MS_DEFAULT = 120_000
DEFAULT_API_TIMEOUT_MS = 60_000


def require_int(name: str, value: int, minimum: int, unit: str) -> int:
    """``value`` if it is an int of at least ``minimum``; else one clear InvalidConfigError
    (never the TypeError a comparison with text or None would raise later)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidConfigError(f"{name} is {value!r}; it must be an int of {unit} >= {minimum}")
    return value


def require_positive_ms(name: str, value_ms: int) -> int:
    return require_int(name, value_ms, 1, "milliseconds")


def resolve_delivery_timeout_ms(
    delivery_timeout_ms: int | None, linger_ms: int, request_timeout_ms: int
) -> int:
    """The delivery timeout to use, as Kafka's producer decides it.

    A record must be able to wait its linger and then one whole request, or it would
    expire while its request may still succeed. Kafka refuses a delivery timeout set
    below that, and raises its own default to fit; so do we.
    """
    floor_ms = linger_ms + request_timeout_ms
    if delivery_timeout_ms is None:
        return max(DELIVERY_TIMEOUT_MS_DEFAULT, floor_ms)
    require_positive_ms("delivery_timeout_ms", delivery_timeout_ms)
    if delivery_timeout_ms < floor_ms:
        raise InvalidConfigError(
            f"delivery_timeout_ms ({delivery_timeout_ms}) must be at least linger_ms "
            f"({linger_ms}) + request_timeout_ms ({request_timeout_ms}) = {floor_ms}: a record "
            "must be able to wait its linger and one whole request; raise delivery_timeout_ms "
            "or lower request_timeout_ms"
        )
    return delivery_timeout_ms
