"""``retry_routed``, the cluster client's one retry loop: again after the answers it is
given, the policy's pauses in between (no shorter than the floor), the last answer raised
as it is when the deadline or the attempts run out, and never a wait past the deadline."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from twinlog.engine.base.backoff import Backoff
from twinlog.engine.base.errors import (
    BrokerUnavailableError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
    TwinlogError,
    UnknownTopicOrPartitionError,
)
from twinlog.rpc.client.call_deadline import UNSENT, current_deadline_s
from twinlog.rpc.client.cluster_retry import ROUTING_ATTEMPTS_MAX, retry_routed

STEADY = Backoff(10, 40, jitter=0)
MOVED: tuple[type[TwinlogError], ...] = (NotLeaderOrFollowerError,)
DOWN: tuple[type[TwinlogError], ...] = (BrokerUnavailableError,)


def routed(
    attempt: Callable[[], str],
    retry_on: tuple[type[TwinlogError], ...],
    deadline_s: float,
    sleep: Callable[[float], None] = time.sleep,
    pause_floor_s: Callable[[], float] = lambda: 0.0,
) -> str:
    return retry_routed(
        attempt,
        retry_on=retry_on,
        deadline_s=deadline_s,
        backoff=STEADY,
        what=lambda: "orders-0",
        sleep=sleep,
        pause_floor_s=pause_floor_s,
    )


class Failing:
    """Raises ``errors`` in turn, then answers "done"."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0
        self.deadlines: list[float | None] = []

    def __call__(self) -> str:
        self.calls += 1
        self.deadlines.append(current_deadline_s())
        if self.errors:
            raise self.errors.pop(0)
        return "done"


def test_answers_that_mean_again_are_retried_after_the_policy_s_pauses() -> None:
    attempt = Failing(*(NotLeaderOrFollowerError(f"moved {n}") for n in range(4)))
    pauses: list[float] = []
    deadline_s = time.monotonic() + 60
    answer = routed(attempt, MOVED, deadline_s, sleep=pauses.append)
    assert answer == "done" and attempt.calls == 5
    assert pauses == [0.01, 0.02, 0.04, 0.04]  # the policy's, up to its ceiling
    assert attempt.deadlines == [deadline_s] * 5  # every request under the call's deadline


def test_a_pause_is_never_shorter_than_its_floor() -> None:
    pauses: list[float] = []
    routed(
        Failing(NotLeaderOrFollowerError("moved"), NotLeaderOrFollowerError("moved")),
        MOVED,
        time.monotonic() + 60,
        sleep=pauses.append,
        pause_floor_s=lambda: 0.03,
    )
    assert pauses == [0.03, 0.03]


def test_any_other_error_ends_the_call_at_once() -> None:
    attempt = Failing(UnknownTopicOrPartitionError("no such topic"))
    with pytest.raises(UnknownTopicOrPartitionError):
        routed(attempt, MOVED, time.monotonic() + 60, sleep=lambda _: pytest.fail("no pause"))
    assert attempt.calls == 1


def test_the_last_answer_is_raised_as_it_is_before_a_pause_would_reach_the_deadline() -> None:
    attempt = Failing(*(BrokerUnavailableError(f"down {n}") for n in range(1_000)))
    deadline_s = time.monotonic() + 0.2

    def sleep(pause_s: float) -> None:
        assert time.monotonic() + pause_s < deadline_s  # no pause reaches the deadline
        time.sleep(pause_s)

    with pytest.raises(BrokerUnavailableError) as caught:
        routed(attempt, DOWN, deadline_s, sleep=sleep)
    assert 3 <= attempt.calls < 1_000
    assert str(caught.value) == f"down {attempt.calls - 1}"  # the last, unchanged


def test_the_attempts_are_bounded_whatever_the_deadline() -> None:
    attempt = Failing(*(BrokerUnavailableError("down") for _ in range(1_000)))
    with pytest.raises(BrokerUnavailableError):
        routed(attempt, DOWN, time.monotonic() + 3_600, sleep=lambda _: None)
    assert attempt.calls == ROUTING_ATTEMPTS_MAX


def test_a_retry_the_deadline_stopped_before_sending_raises_the_last_answer() -> None:
    """On a loaded machine the deadline can pass between the pause and the send: the caller
    gets the broker's last answer, not "nothing was sent"."""
    answers = iter(
        [
            NotLeaderOrFollowerError("orders-0 moved"),
            RequestTimedOutError(f"{UNSENT}; nothing was sent"),
        ]
    )

    def attempt() -> str:
        raise next(answers)

    with pytest.raises(NotLeaderOrFollowerError, match="moved"):
        routed(attempt, MOVED, time.monotonic() + 10, sleep=lambda _: None)
    first_unsent = iter([RequestTimedOutError(f"{UNSENT}; nothing was sent")])

    def unsent_at_once() -> str:
        raise next(first_unsent)

    with pytest.raises(RequestTimedOutError):  # no answer before it: the timeout is the news
        routed(unsent_at_once, MOVED, time.monotonic() + 10)
