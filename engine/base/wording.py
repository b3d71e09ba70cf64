"""Counts in messages a person reads: "1 record", "2 records" (never "1 records")."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` and ``noun`` agreeing in number; ``plural`` where adding an s is wrong."""
    return f"{count} {agreeing(count, noun, plural)}"


def agreeing(count: int, noun: str, plural: str | None = None) -> str:
    """``noun`` in the number ``count`` asks for (where the count is shown apart)."""
    return noun if count == 1 else plural or noun + "s"
