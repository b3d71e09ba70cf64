"""When did each condition first hold? A thread polls named probes (ZooKeeper reads, a
process's exit, file sizes) every ``interval_s`` and keeps the first monotonic time each
answered true. Resolution: the interval plus one ZooKeeper round trip."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping

from twinlog.engine.base.errors import TwinlogError

POLL_INTERVAL_S = 0.01


class Timeline:
    def __init__(
        self,
        probes: Mapping[str, Callable[[], bool]],
        timeout_s: float,
        interval_s: float = POLL_INTERVAL_S,
    ) -> None:
        self.probes = dict(probes)
        self.timeout_s = timeout_s
        self.interval_s = interval_s
        self.first_true_s: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-timeline", daemon=True)

    def __enter__(self) -> Timeline:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(timeout=self.timeout_s)

    def _run(self) -> None:
        deadline = time.monotonic() + self.timeout_s
        while not self._stop.is_set() and time.monotonic() < deadline:
            for name, probe in self.probes.items():
                if name in self.first_true_s:
                    continue
                try:
                    if probe():
                        self.first_true_s[name] = time.monotonic()
                except (TwinlogError, OSError):
                    pass  # ZooKeeper busy, a file being replaced: ask again next round
            if len(self.first_true_s) == len(self.probes):
                return
            self._stop.wait(self.interval_s)

    def seen(self, name: str) -> float | None:
        return self.first_true_s.get(name)

    def require(self, name: str) -> float:
        found = self.first_true_s.get(name)
        if found is None:
            raise RuntimeError(f"'{name}' was not observed within {self.timeout_s:.0f} s")
        return found
