"""twinlog's broker floor: batch format, data log, coordinator, the embedded ``Broker``.

``engine.Broker`` is resolved lazily: the lower floors (``journal``, ``copier``)
import ``engine.batch_format`` and friends, and an eager import of the broker
here would import them back in a cycle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.broker import Broker

__all__ = ["Broker"]


def __getattr__(name: str) -> Any:
    if name == "Broker":
        from engine.broker import Broker

        return Broker
    raise AttributeError(f"module 'engine' has no attribute {name!r}")
