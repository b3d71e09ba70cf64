"""Argument types shared by the commands: counts and durations refused by argparse itself.

A bad value then gets argparse's answer: the usage of the subcommand it belongs to and
one line naming the flag, exit status 2, before anything connects to a server.
"""

from __future__ import annotations

import argparse


class UsageError(Exception):
    """A flag or input the user must fix; ``main`` prints it as one line and exits with 2."""


def _whole_number(text: str) -> int:
    try:
        return int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None


def positive_int(text: str) -> int:
    """A count or duration that must be at least 1 (``--max-messages``, ``--*-ms``)."""
    number = _whole_number(text)
    if number <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, not {number}")
    return number


def non_negative_int(text: str) -> int:
    """A partition, an offset or a wait that may be 0."""
    number = _whole_number(text)
    if number < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, not {number}")
    return number


def key_value_pair(text: str) -> tuple[str, str]:
    """``KEY=VALUE``: split at the first ``=``; the key must not be empty."""
    key, equals, value = text.partition("=")
    if not equals or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, not {text!r}")
    return key, value
