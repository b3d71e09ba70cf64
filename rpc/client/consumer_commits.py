"""A consumer's group offsets: ``OffsetCommitter`` stores them (``commit``, ``commit_async``,
auto-commit) and reads them back (``committed``), as the commit side of Kafka's
``ConsumerCoordinator``.

What it stores: the offsets given, or the positions of ``SubscriptionState``, committed as
the member of the last poll (``SubscriptionState.member``: a zombie's commit is refused by
its generation). ``consumer.Consumer`` calls it for its commit methods, at ``poll`` (the
auto-commit) and at ``close``; ``consumer_rebalance`` before a revocation and on leaving;
``consumer_positions`` calls ``committed`` to find where a partition starts.

Commits go in the order they were asked: ``commit_async`` runs on one commit thread, and
``commit`` first waits for the last ``commit_async``.

Threads: ``commit``, ``commit_quietly``, ``commit_async``, ``auto_commit_if_due`` and
``close`` run on the consumer's thread, reading its positions there; ``committed`` on the
consumer's thread or a fetcher thread (it reads no state of its own). The commit thread
runs what ``commit_async`` gives it, with the offsets and member read before, and changes
nothing here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

from twinlog.engine.base.errors import TwinlogError
from twinlog.engine.base.types import TopicPartition
from twinlog.rpc.client.consumer_settings import ConsumerSettings
from twinlog.rpc.client.consumer_subscription import SubscriptionState
from twinlog.rpc.client.retry import call_with_retry
from twinlog.rpc.wire.broker_api import BrokerApi

log = logging.getLogger("twinlog.client")

NO_OFFSET = -1  # what fetch_offsets answers for a partition without a committed offset

CommitCallback = Callable[[dict[TopicPartition, int], BaseException | None], None]


class OffsetCommitter:
    def __init__(
        self, broker: BrokerApi, subscriptions: SubscriptionState, settings: ConsumerSettings
    ) -> None:
        self._broker = broker
        self._subscriptions = subscriptions
        self._settings = settings
        self._committer: ThreadPoolExecutor | None = None  # commit_async's one thread
        self._last_async: Future[None] | None = None  # commit() waits for it
        self._next_auto_commit_s = time.monotonic() + settings.auto_commit_interval_ms / 1000

    def commit(
        self, group_id: str, offsets: Mapping[Any, int] | None, timeout_ms: int | None = None
    ) -> None:
        """Consumer's thread: store ``offsets`` (None: the positions), after the last
        ``commit_async``; both within ``timeout_ms`` (None: default_api_timeout_ms), then
        RequestTimedOutError."""
        chosen = self._offsets_to_commit(offsets)
        settings = self._settings
        budget_ms = settings.default_api_timeout_ms if timeout_ms is None else timeout_ms
        started_s = time.monotonic()
        last_async = self._last_async
        if last_async is not None:
            # An earlier commit_async still in flight would land after this one and move
            # the committed offsets back: commits go in the order they were asked.
            wait([last_async], timeout=budget_ms / 1000)
        if chosen:
            member = self._subscriptions.member()
            budget_ms = max(1, budget_ms - int((time.monotonic() - started_s) * 1000))
            call_with_retry(
                settings.retry,
                lambda: self._broker.commit_offsets(group_id, chosen, member),
                "commit()",
                timeout_ms=budget_ms,
            )

    def commit_quietly(
        self, partitions: Iterable[TopicPartition], when: str, timeout_ms: int | None = None
    ) -> None:
        """Consumer's thread: ``commit`` the positions of ``partitions``; a failure is
        logged, not raised (before a revocation, on leaving, at close: the records after
        the last commit are read again by the next owner, at-least-once)."""
        group_id = self._settings.group_id
        assert group_id, "only a consumer with a group commits"
        try:
            self.commit(group_id, self._subscriptions.positions(partitions), timeout_ms)
        except TwinlogError as error:
            log.warning("group %r: commit %s failed: %s", group_id, when, error)

    def commit_async(
        self,
        group_id: str,
        offsets: Mapping[Any, int] | None,
        callback: CommitCallback | None = None,
    ) -> Future[None]:
        """Consumer's thread: ``commit`` on the commit thread (made at the first call);
        ``callback(offsets, error)`` there when it is done (error None on success). Sets
        the commit ``commit`` waits for."""
        chosen = self._offsets_to_commit(offsets)
        member = self._subscriptions.member()
        if self._committer is None:
            self._committer = ThreadPoolExecutor(1, thread_name_prefix="twinlog-commit")
        settings = self._settings

        def run() -> None:
            error: BaseException | None = None
            try:
                if chosen:
                    call_with_retry(
                        settings.retry,
                        lambda: self._broker.commit_offsets(group_id, chosen, member),
                        "commit_async()",
                        timeout_ms=settings.default_api_timeout_ms,
                    )
            except BaseException as failure:
                error = failure
            if callback is not None:
                callback(chosen, error)
            if error is not None:
                raise error

        self._last_async = self._committer.submit(run)
        return self._last_async

    def auto_commit_if_due(self) -> None:
        """Consumer's thread, at each poll of a member: with auto-commit, every
        ``auto_commit_interval_ms``, commit the positions of what earlier polls returned
        (before this poll returns more: at-least-once, as Kafka's auto-commit)."""
        settings = self._settings
        if not settings.enable_auto_commit or time.monotonic() < self._next_auto_commit_s:
            return
        self._next_auto_commit_s = time.monotonic() + settings.auto_commit_interval_ms / 1000
        assert settings.group_id, "auto-commit is on only with a group"
        self.commit_async(settings.group_id, None, _log_auto_commit_failure)

    def committed(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int | None]:
        """Consumer's thread or a fetcher thread: the group's committed offsets (None where
        there is none), within default_api_timeout_ms."""
        chosen = list(partitions)
        settings = self._settings
        found = call_with_retry(
            settings.retry,
            lambda: self._broker.fetch_offsets(group_id, chosen),
            "committed()",
            timeout_ms=settings.default_api_timeout_ms,
        )
        return {tp: (None if found.get(tp, NO_OFFSET) == NO_OFFSET else found[tp]) for tp in chosen}

    def close(self) -> None:
        """Consumer's thread, at close: wait for the commits asked of the commit thread."""
        if self._committer is not None:
            self._committer.shutdown(wait=True)

    def _offsets_to_commit(self, offsets: Mapping[Any, int] | None) -> dict[TopicPartition, int]:
        if offsets is None:
            return self._subscriptions.positions()
        return {TopicPartition(*tp): int(offset) for tp, offset in offsets.items()}


def _log_auto_commit_failure(
    offsets: dict[TopicPartition, int], error: BaseException | None
) -> None:
    if error is not None:
        log.warning("auto-commit of %d offset(s) failed: %s", len(offsets), error)
