"""How many long polls may be parked at once: in all, per principal, per connection.

grpcio's sync server answers a unary call on the worker thread that received it, so a
long poll that waits holds a thread for as long as it waits (there is no purgatory to
park it in). Without a bound, 130 idle consumers waiting 30 s took all 128 threads and
another client's commit waited 28 s. A long poll takes a slot here before it waits;
without one it gets what is there now, and if that is nothing it is refused as
retriable (the consumer backs off): threads beyond ``long_polls_max`` and the produce
streams' share are always free for other calls.

Thread rule: any thread; ``_lock`` guards the counts.
"""

from __future__ import annotations

import threading
from collections import Counter


class LongPollSlots:
    def __init__(self, total_max: int, per_principal_max: int, per_connection_max: int) -> None:
        self.total_max = total_max
        self.per_principal_max = per_principal_max
        self.per_connection_max = per_connection_max
        self._lock = threading.Lock()
        self._total = 0
        self._by_principal: Counter[str] = Counter()
        self._by_connection: Counter[str] = Counter()

    @property
    def parked(self) -> int:
        return self._total

    def try_take(self, principal: str | None, connection: str) -> str | None:
        """Take a slot (None), or say which limit is reached (the slot was not taken).

        ``principal`` None: a caller with no identity of its own (no authentication), to
        whom only the total and per-connection limits apply.
        """
        with self._lock:
            if self._total >= self.total_max:
                return f"{self._total} long polls are parked, the server's long_polls_max"
            if principal is not None and self._by_principal[principal] >= self.per_principal_max:
                return (
                    f"principal {principal} has {self._by_principal[principal]} long polls "
                    "parked, the server's long_polls_per_principal_max"
                )
            if self._by_connection[connection] >= self.per_connection_max:
                return (
                    f"connection {connection} has {self._by_connection[connection]} long polls "
                    "parked, the server's long_polls_per_connection_max"
                )
            self._total += 1
            if principal is not None:
                self._by_principal[principal] += 1
            self._by_connection[connection] += 1
            return None

    def give_back(self, principal: str | None, connection: str) -> None:
        with self._lock:
            self._total -= 1
            if principal is not None:
                self._by_principal[principal] -= 1
                if not self._by_principal[principal]:
                    del self._by_principal[principal]
            self._by_connection[connection] -= 1
            if not self._by_connection[connection]:
                del self._by_connection[connection]
