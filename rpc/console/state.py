"""What every page of one console shares: the session, the charts' history, the tally."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field

from flask import current_app

from twinlog.rpc.console.session import ClusterSession
from twinlog.rpc.console.throughput import ThroughputHistory
from twinlog.rpc.console.transactions_view import TransactionTally

EXTENSION = "twinlog.console"
# Destructive actions, one line each (as the broker's audit log writes its own lines).
actions = logging.getLogger("twinlog.console")


@dataclass
class ConsoleState:
    session: ClusterSession
    history: ThroughputHistory = field(default_factory=ThroughputHistory)
    tally: TransactionTally = field(default_factory=TransactionTally)


def console_state() -> ConsoleState:
    state: ConsoleState = current_app.extensions[EXTENSION]
    return state


def log_action(event: str, **fields: object) -> None:
    """``console.topic.delete server=... topic=orders outcome=ok``."""
    pairs = " ".join(f"{key}={_quoted(value)}" for key, value in fields.items())
    actions.info("%s server=%s %s", event, console_state().session.target.server, pairs)


@contextlib.contextmanager
def logged_action(event: str, **fields: object) -> Iterator[None]:
    """Log the action the block takes: ``outcome=ok``, or ``outcome=failed`` and the error."""
    try:
        yield
    except Exception as error:
        log_action(event, **fields, outcome="failed", error=type(error).__name__)
        raise
    log_action(event, **fields, outcome="ok")


def _quoted(value: object) -> str:
    text = str(value)
    if not text or any(character in text for character in ' "='):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text
