"""The writer's side of the ``append-state`` mark (format: ``checkpoints``).

``DataLog.append_all_as_leader`` writes a transaction's batches one by one and publishes
them at once; readers of the files cannot see that publication, so the log
marks the append as in progress before its first byte and as finished after it
is published (or rolled back). ``read_only.LogReader.end_offset`` honours the mark.
An ``append_all_as_leader`` told it writes one batch (``batch_count=1``, the copier's
copy of a partition's one batch) writes no mark: a reader sees a single batch whole
(its length and CRC) or not at all, as for ``DataLog.append_as_leader``, and each mark costs a
file replaced (open, write, rename) twice per append, per partition and transaction.

A mark left in progress by a killed process stays until this log's next write
succeeds: the broker's open runs the copier's recovery (which cuts or finishes
the torn copy) before any write, so a write proves the tail whole again.

Thread rule: the data log's writer lock serializes every call.
"""

from __future__ import annotations

import logging
from pathlib import Path

from twinlog.engine.base.errors import DiskFullError
from twinlog.engine.log.checkpoints import (
    NO_APPEND,
    AppendState,
    read_append_state,
    write_append_state,
)

logger = logging.getLogger(__name__)


class AppendMarks:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.state = read_append_state(directory) or NO_APPEND

    def started(self, first_offset: int) -> None:
        """Before the first batch: DiskFullError if the mark cannot be written (nothing was)."""
        state = AppendState(self.state.sequence + 1, 1, first_offset)
        write_append_state(self.directory, state)
        self.state = state

    def finished(self) -> None:
        """After the batches were published or removed; never raises.

        A mark that cannot be cleared (a full disk) only makes readers of the
        files stop earlier, at its offset, until the next write clears it.
        """
        state = AppendState(self.state.sequence + 1, 0, self.state.first_offset)
        try:
            write_append_state(self.directory, state)
        except (OSError, DiskFullError) as error:
            logger.warning(
                "%s: could not clear the append-in-progress mark (%s); readers of the files "
                "stop at offset %d until the next write",
                self.directory,
                error,
                state.first_offset,
            )
            return
        self.state = state

    def settle(self) -> None:
        """After any other successful write: clear a mark a killed process left."""
        if self.state.in_progress:
            self.finished()
