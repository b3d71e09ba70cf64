"""The one backoff policy: how long to pause before retry number n, ``Backoff``.

    Backoff(initial_ms=50, max_ms=1_000)            50, 100, 200, 400, 800, 1000, 1000 ...
                                                    each times a factor in [0.8, 1.2],
                                                    never above 1000
    Backoff(initial_ms=50, max_ms=1_000, jitter=0)  the same pauses, exactly

Kafka's ``ExponentialBackoff`` (``retry.backoff.ms``, ``retry.backoff.max.ms``, jitter
0.2) is the model: the pause before retry ``attempt`` (1: the first retry) is
``initial_ms * multiplier ** (attempt - 1)``, times a random factor in
``[1 - jitter, 1 + jitter]``, and never more than ``max_ms``, jitter included: the
ceiling is a ceiling. An ``initial_ms`` above ``max_ms`` is ``max_ms``.

Each user keeps its own numbers; what they share is the rule. A value, not a counter:
the caller counts its failures (and starts again at 1 after a success), so one policy
serves any number of threads and retry loops.

The users: the client's ``RetryPolicy`` (``rpc.client.retry``: ``call_with_retry``, the
producer's resends, the consumer's fetch backoff, a group member's heartbeats), the
cluster client's routing (``rpc.client.cluster_retry``), the follower's replica
fetchers (``rpc.replication.leader_fetcher``, not jittered) and the transaction
coordinator's completion worker (``engine.transactions.coordinator_completion``, not
jittered) and a coordinator slot's load retries (``engine.transactions.coordinator_slots``,
not jittered).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from twinlog.engine.base.config_rules import ConfigRules, Number

# The jitter's own generator, not the ``random`` module's shared one: a retry loop on a
# background thread then never draws from (or reseeds) state that an application, or a
# test framework that manages it per example (Hypothesis), relies on.
_JITTER = random.Random()


@dataclass(frozen=True)
class Backoff:
    initial_ms: float  # the pause before the first retry
    max_ms: float  # the longest pause, jitter included
    multiplier: float = 2.0  # each pause is the previous one times this, up to max_ms
    jitter: float = 0.2  # each pause is times a random factor in [1 - jitter, 1 + jitter]

    def __post_init__(self) -> None:
        RULES.check(self)

    def delay_ms(self, attempt: int, rng: random.Random | None = None) -> float:
        """The pause before retry number ``attempt`` (1: the first), in milliseconds.

        ``rng``: where the jitter comes from (None: this module's own generator)."""
        if attempt < 1:
            raise ValueError(f"retries are counted from 1, got {attempt}")
        initial_ms = min(self.initial_ms, self.max_ms)
        if initial_ms <= 0 or self.multiplier == 1:
            base_ms = initial_ms
        else:
            # The exponent stops where the ceiling is reached: no overflow however many
            # retries a caller has counted.
            steps_max = math.ceil(math.log(self.max_ms / initial_ms, self.multiplier))
            base_ms = min(initial_ms * self.multiplier ** min(attempt - 1, steps_max), self.max_ms)
        if self.jitter:
            uniform = _JITTER.uniform if rng is None else rng.uniform
            base_ms *= uniform(1 - self.jitter, 1 + self.jitter)
        return min(base_ms, self.max_ms)

    def delay_s(self, attempt: int, rng: random.Random | None = None) -> float:
        """``delay_ms`` in seconds, as ``time.sleep`` and ``Event.wait`` take it."""
        return self.delay_ms(attempt, rng) / 1000


RULES = ConfigRules(
    "backoff",
    {
        "initial_ms": Number(0),  # a pause cannot be negative
        "max_ms": Number(0),
        "multiplier": Number(1),  # pauses never shrink
        "jitter": Number(0, 1, largest_excluded=True),  # at 1, a pause could be none at all
    },
)
