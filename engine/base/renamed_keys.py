"""Configuration keys that were renamed, old name -> new name, in one table.

Names put units and ``max`` last (``batch_bytes_max``, ``fetch_wait_ms_max``). The
older names still work wherever configuration is read (``Broker.open(**config)``,
``twinlog serve --config``, topic configs stored in a data directory), so that no
existing setup breaks; ``canonical_key`` is the one place that maps them.
"""

from __future__ import annotations

RENAMED_KEYS: dict[str, str] = {
    "max_batch_bytes": "batch_bytes_max",
    "max_request_bytes": "request_bytes_max",
    "max_open_transactions": "open_transactions_max",
    "fetch_max_bytes_max": "fetch_bytes_max",
    "fetch_max_wait_ms_max": "fetch_wait_ms_max",
}


def canonical_key(key: str) -> str:
    """The current name of a config key given in underscore form (old names included)."""
    return RENAMED_KEYS.get(key, key)
