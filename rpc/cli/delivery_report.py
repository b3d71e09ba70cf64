"""What ``twinlog produce`` says about delivery: counts, and the first input lines that failed.

A record is *delivered* when the broker acknowledged it (without a transaction) or
when its transaction committed; *not delivered* when its send failed, when its
transaction was aborted, or when no answer came within the delivery timeout (then
it may or may not have been written: the error says so). Records still waiting for
an answer when Ctrl-C ends the command are *unconfirmed*.

    3 records not delivered (first failing lines: 3, 7, 12): RequestTimedOutError: ...

Thread rule: ``track`` and the transaction calls on the command's thread; future
callbacks on the client's I/O thread; ``counts_text`` from any thread.
"""

from __future__ import annotations

import threading
import time

from twinlog.engine.base.wording import counted
from twinlog.rpc.client.futures import RecordFuture

FIRST_LINES_MAX = 5


class DeliveryTracker:
    def __init__(self, transactional: bool) -> None:
        self.transactional = transactional
        self._changed = threading.Condition()
        self.sent = 0
        self.acknowledged = 0
        self.committed = 0
        self.not_delivered = 0
        self.failing_lines: list[int] = []
        self.first_error: BaseException | None = None
        self._pending: dict[int, None] = {}  # line numbers waiting for an answer, in order
        self._open_lines: list[int] = []  # first lines of the open transaction
        self._open_count = 0

    # --- records -----------------------------------------------------------------------

    def track(self, future: RecordFuture, line: int) -> None:
        with self._changed:
            self.sent += 1
            self._pending[line] = None
            self._open_count += 1
            if len(self._open_lines) < FIRST_LINES_MAX:
                self._open_lines.append(line)
        future.add_done_callback(lambda done: self._answered(done, line))

    def _answered(self, future: RecordFuture, line: int) -> None:
        error = future.exception()
        with self._changed:
            if self._pending.pop(line, "gone") == "gone":
                return  # given up on already (give_up_pending)
            if error is None:
                self.acknowledged += 1
            else:
                self._failed(line, error)
            self._changed.notify_all()

    def failed_at_once(self, line: int, error: BaseException) -> None:
        """A send that raised instead of returning a future: the record was not queued."""
        with self._changed:
            self.sent += 1
            self._failed(line, error)

    def _failed(self, line: int, error: BaseException) -> None:
        if not self.transactional:  # in a transaction, counted when it is aborted
            self.not_delivered += 1
        if len(self.failing_lines) < FIRST_LINES_MAX:
            self.failing_lines.append(line)
        if self.first_error is None:
            self.first_error = error

    @property
    def pending(self) -> int:
        with self._changed:
            return len(self._pending)

    def wait_for_answers(self, timeout_s: float) -> bool:
        """Wait until every tracked record has its answer; False if some still wait."""
        deadline_s = time.monotonic() + timeout_s
        with self._changed:
            while self._pending:
                remaining_s = deadline_s - time.monotonic()
                if remaining_s <= 0:
                    return False
                self._changed.wait(remaining_s)
            return True

    def give_up_pending(self, error: BaseException) -> None:
        """Count the records still waiting as not delivered, with ``error``."""
        with self._changed:
            lines = list(self._pending)
            self._pending.clear()
            for line in lines:
                self._failed(line, error)

    # --- transactions --------------------------------------------------------------------

    def transaction_committed(self) -> None:
        with self._changed:
            self.committed += self._open_count
            self._open_count = 0
            self._open_lines = []

    def transaction_aborted(self, error: BaseException | None = None) -> int:
        """The open transaction's records are not delivered; returns how many."""
        with self._changed:
            count = self._open_count
            self.not_delivered += count
            if not self.failing_lines:
                self.failing_lines.extend(self._open_lines)
            if self.first_error is None and error is not None:
                self.first_error = error
            self._open_count = 0
            self._open_lines = []
            return count

    # --- reporting -----------------------------------------------------------------------

    @property
    def delivered(self) -> int:
        with self._changed:
            return self.committed if self.transactional else self.acknowledged

    def counts_text(self) -> str:
        """``100 records delivered, 5 not delivered`` (and the unconfirmed, if any)."""
        with self._changed:
            delivered = self.committed if self.transactional else self.acknowledged
            unconfirmed = self.sent - delivered - self.not_delivered
            text = f"{counted(delivered, 'record')} delivered, {self.not_delivered} not delivered"
        return text + (f", {unconfirmed} unconfirmed" if unconfirmed else "")

    def failure_line(self) -> str | None:
        """The one line naming what was not delivered, or None if everything was."""
        with self._changed:
            if not self.not_delivered:
                return None
            lines = ", ".join(str(line) for line in self.failing_lines)
            error = self.first_error
        cause = f": {type(error).__name__}: {error}" if error is not None else ""
        not_delivered = counted(self.not_delivered, "record")
        return f"{not_delivered} not delivered (first failing lines: {lines}){cause}"
