"""A broker's stop asked over the wire (``twinlog cluster decommission``, ShutdownBroker):
the same stop as SIGTERM, a controlled shutdown (leaderships moved away first), then a
clean exit with status 0, which a supervisor that restarts on failure leaves stopped.

The call names the broker it means: a call that reached another broker (a stale address,
a proxy) is refused, never obeyed. Thread rule: ``request`` from any thread, once or more.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from twinlog.engine.base.errors import InvalidConfigError

log = logging.getLogger("twinlog.server")


class BrokerShutdown:
    def __init__(self, broker_id: int, stop: Callable[[], None]) -> None:
        """``stop``: the serve loop's stop (what SIGTERM does)."""
        self.broker_id = broker_id
        self._stop = stop
        self._asked = threading.Event()

    @property
    def asked(self) -> bool:
        return self._asked.is_set()

    def request(self, broker_id: int, principal: str) -> None:
        """Stop this broker; InvalidConfigError when ``broker_id`` names another."""
        if broker_id != self.broker_id:
            raise InvalidConfigError(
                f"this is broker {self.broker_id}, not broker {broker_id}: it does not stop. "
                f"Send the shutdown to broker {broker_id}'s own address"
            )
        if not self._asked.is_set():
            self._asked.set()
            log.info("a shutdown was asked by %s: stopping (controlled shutdown)", principal)
            self._stop()
