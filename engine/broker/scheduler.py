"""The broker's background work: named tasks, each one round of work at its own interval.

    task             interval                          one round
    txn-timeouts     transaction_check_interval_ms     abort the transactions past their timeout
    txn-checkpoints  checkpoint_interval_ms            checkpoint every coordinator, write the
                                                       MARK_APPLIED records left for the next
                                                       copy group, then purge the local journal
                                                       below the low watermark
    retention        retention_check_interval_ms       delete segments past retention
    compaction       compaction_check_interval_ms      compact the compacted topics' logs
    log-flush        half the shortest flush.ms        fsync interval-flushed logs that are due
    group-sessions   group_session_check_interval_ms   remove group members past their session
                                                       or rebalance timeout

``Scheduler`` runs every task on a thread of its own with one loop: wait the
interval (or stop), run a round, log a failure and go on (the next round is the
retry). ``broker_tasks`` lists the broker's tasks; each round is a plain function
below, which a test or tool may also run once (``Scheduler.run_round``).

Thread rule: ``start`` and ``stop`` are called by the broker's open and close;
``run_round`` and ``is_stopping`` from any thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from twinlog.engine.broker.config import BrokerConfig
from twinlog.engine.broker.partition import Partition
from twinlog.engine.log import LogConfig
from twinlog.engine.log.config import FLUSH_INTERVAL
from twinlog.engine.records.decompression_budget import DecompressionBudget
from twinlog.engine.transactions.coordinator import Coordinator
from twinlog.journal import JournalLogs

log = logging.getLogger(__name__)

STOP_WAIT_S_MAX = 10.0  # how long stop() waits for each task's round in progress

PartitionsSnapshot = Callable[[], list[Partition]]  # read each round: topics come and go


@dataclass(frozen=True)
class ScheduledTask:
    name: str  # also its thread's name
    interval_ms: Callable[[], int]  # read again before each round
    run_round: Callable[[], None]


class Scheduler:
    def __init__(self) -> None:
        self._stop = threading.Event()
        self._tasks: dict[str, ScheduledTask] = {}
        self._threads: list[threading.Thread] = []

    def start(self, tasks: Iterable[ScheduledTask]) -> None:
        for task in tasks:
            self._tasks[task.name] = task
            thread = threading.Thread(target=self._loop, args=(task,), name=task.name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def _loop(self, task: ScheduledTask) -> None:
        while not self._stop.wait(task.interval_ms() / 1000):
            try:
                task.run_round()
            except Exception:
                log.exception("background task %s failed; it will run again", task.name)

    def run_round(self, name: str) -> None:
        """Run one round of the task ``name`` now, in the caller's thread."""
        self._tasks[name].run_round()

    def is_stopping(self) -> bool:
        """True once ``stop`` was called: a long round checks it to end early."""
        return self._stop.is_set()

    def stop(self) -> None:
        """Stop every task and wait for the rounds in progress."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=STOP_WAIT_S_MAX)


def broker_tasks(
    config: BrokerConfig,
    coordinators: Callable[[], Sequence[Coordinator]],
    journal: JournalLogs,
    low_watermark: Callable[[], int],
    partitions: PartitionsSnapshot,
    should_stop: Callable[[], bool],
    expire_group_members: Callable[[], None],
    decompression_budget: DecompressionBudget | None = None,
    write_marks_left: Callable[[], object] | None = None,
) -> list[ScheduledTask]:
    """The broker's background tasks, in the order of the table above."""

    def every(interval_ms: int) -> Callable[[], int]:
        return lambda: interval_ms

    return [
        ScheduledTask(
            "txn-timeouts",
            every(config.transaction_check_interval_ms),
            lambda: expire_transactions(coordinators()),
        ),
        ScheduledTask(
            "txn-checkpoints",
            every(config.checkpoint_interval_ms),
            lambda: checkpoint_and_purge(coordinators(), journal, low_watermark, write_marks_left),
        ),
        ScheduledTask(
            "retention",
            every(config.retention_check_interval_ms),
            lambda: apply_retention(partitions()),
        ),
        ScheduledTask(
            "compaction",
            every(config.compaction_check_interval_ms),
            lambda: compact_logs(partitions(), should_stop, decompression_budget),
        ),
        ScheduledTask(
            "log-flush",
            lambda: flush_check_interval_ms(partitions()),
            lambda: flush_due_logs(partitions()),
        ),
        ScheduledTask(
            "group-sessions",
            every(config.group_session_check_interval_ms),
            expire_group_members,
        ),
    ]


# --- one round of each task ----------------------------------------------------------------


def expire_transactions(coordinators: Iterable[Coordinator]) -> None:
    for coordinator in coordinators:
        coordinator.expire()


def checkpoint_and_purge(
    coordinators: Iterable[Coordinator],
    journal: JournalLogs,
    low_watermark: Callable[[], int],
    write_marks_left: Callable[[], object] | None = None,
) -> None:
    for coordinator in coordinators:
        coordinator.checkpoint()
    if write_marks_left is not None:
        # A copy's transaction is below the low watermark once COMMITTED: its row must
        # say APPLIED before the purge reads it (an APPLYING row is kept, with a warning).
        write_marks_left()
    journal.purge_below(low_watermark())


def apply_retention(partitions: Iterable[Partition]) -> None:
    for partition in partitions:
        partition.apply_retention()


def compact_logs(
    partitions: Iterable[Partition],
    should_stop: Callable[[], bool],
    budget: DecompressionBudget | None = None,
) -> None:
    for partition in partitions:
        if partition.log.config.compacts and not should_stop():
            try:  # one damaged partition must not stop the others' compaction
                partition.compact_log(should_stop=should_stop, budget=budget)
            except Exception:
                log.exception("compacting %s failed; it will be tried again", partition.name)


def flush_due_logs(partitions: Iterable[Partition]) -> None:
    # The interval flush policy is checked on append only: without this, the last
    # appends of a burst would stay unfsynced until the next append, however late.
    for partition in partitions:
        if partition.log.config.flush_policy == FLUSH_INTERVAL:
            partition.log.flush_if_due()


def flush_check_interval_ms(partitions: Iterable[Partition]) -> int:
    """Half the shortest flush.ms of the interval-flushed logs (read each round, as
    topics come and go), so no unflushed byte waits past 1.5x its log's flush.ms."""
    intervals = [
        config.flush_interval_ms
        for partition in partitions
        if (config := partition.log.config).flush_policy == FLUSH_INTERVAL
        and config.flush_interval_ms > 0  # 0: every append fsyncs, nothing ever waits
    ]
    return max(1, min(intervals, default=LogConfig().flush_interval_ms) // 2)
