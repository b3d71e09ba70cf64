"""The client's timeout settings, with Kafka's names and meaning.

``request_timeout_ms`` bounds one request, ``delivery_timeout_ms`` a record from
``send()`` to its success or failure, ``default_api_timeout_ms`` a call that takes no
timeout of its own. docs/timeouts.md lists which call each one bounds. The settings are
checked by their clients' rules tables (``ProducerConfig``, ``ConsumerConfig``,
``ConnectionOptions``); a call's own ``timeout_ms`` by ``require_positive_ms``.
"""

from __future__ import annotations

from twinlog.engine.base.config_rules import POSITIVE
from twinlog.engine.base.errors import InvalidConfigError

DELIVERY_TIMEOUT_MS_DEFAULT = 120_000
DEFAULT_API_TIMEOUT_MS = 60_000


def require_positive_ms(name: str, value_ms: int) -> int:
    """``value_ms`` if it is an int of at least 1 (milliseconds); else one line in the
    rules' words (never the TypeError a comparison with text or None would raise later)."""
    if not POSITIVE.accepts(value_ms):
        raise InvalidConfigError(
            f"{name} is {POSITIVE.shown(value_ms)}, expected {POSITIVE.allowed(value_ms)}"
        )
    return value_ms


def resolve_delivery_timeout_ms(
    delivery_timeout_ms: int | None, linger_ms: int, request_timeout_ms: int
) -> int:
    """The delivery timeout to use, as Kafka's producer decides it.

    A record must be able to wait its linger and then one whole request, or it would
    expire while its request may still succeed. Kafka refuses a delivery timeout set
    below that (so does ``ProducerConfig``), and raises its own default to fit; so do we.
    """
    if delivery_timeout_ms is None:
        return max(DELIVERY_TIMEOUT_MS_DEFAULT, linger_ms + request_timeout_ms)
    return delivery_timeout_ms
