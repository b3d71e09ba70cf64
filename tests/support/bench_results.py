"""Reading a benchmark's JSON results in its tests."""

from __future__ import annotations

from typing import Any


def numbers_in(value: Any, path: str = "") -> list[tuple[str, float]]:
    """Every number in the results, with where it is (``.cluster.latency.p50_ms``)."""
    if isinstance(value, bool):
        return []
    if isinstance(value, int | float):
        return [(path, float(value))]
    if isinstance(value, dict):
        return [pair for key, item in value.items() for pair in numbers_in(item, f"{path}.{key}")]
    if isinstance(value, list):
        return [pair for i, item in enumerate(value) for pair in numbers_in(item, f"{path}[{i}]")]
    return []
