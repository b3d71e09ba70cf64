"""Promoted leaders whose copier has not finished an earlier term's copies yet (J6).

A replica promoted to leader (a restart's sole member, a failover, a preferred election)
recovers its copies once through the promotion barrier: a half-done copy is finished, a
whole one whose MARK_APPLIED an earlier term left unwritten (``copier.marks_left``) is
recorded APPLIED and its entries dropped. A write or an APPLY does that first when one
comes; an idle partition got none, and kept its last transaction's row APPLYING and its
entries in the journal (``journal_entries_pending``, a purge held back) until one did.
The broker's background round (``PartitionManager``'s "applied-marks" task) asks each
promoted leader here to recover; one still behind its barrier is asked again next round.

A recovery that fails (too few replicas answer, a damaged journal) is not retried here:
the partition's next write recovers first and answers the failure, as before this round.
One that waits (for the in-sync replicas to acknowledge its MARK_APPLIED records, up to
the broker's ``replica_ack_timeout_ms``) holds the round meanwhile, as the marks left do.
A closed partition is forgotten (``forget``); the round stops between partitions once
the broker stops.

Not for ``__consumer_offsets``: an offsets partition's finished copy must be folded into
the group coordinator's view (an APPLY does that, ``seam_adapters``); its leader recovers
at its first write or APPLY, as before.

Thread rule: ``promoted`` from the thread that gives a partition its role, ``run_due``
from the round's; one lock, not held while a partition recovers.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable
from typing import Protocol

from twinlog.engine.base.errors import NotLeaderOrFollowerError

log = logging.getLogger(__name__)


class RecoversAfterPromotion(Protocol):
    name: str

    def recover_after_promotion(self) -> bool:
        """Recover if through the barrier; True once nothing is left to do here."""
        ...


class PromotionRecoveries:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        # partition -> the number of its latest promotion here (a newer one keeps it due)
        self._due: dict[RecoversAfterPromotion, int] = {}
        self._promotions = itertools.count()

    def promoted(self, partition: RecoversAfterPromotion) -> None:
        with self._lock:
            self._due[partition] = next(self._promotions)

    def forget(self, partition: RecoversAfterPromotion) -> None:
        """``partition`` is closing: never asked again (nor held here)."""
        with self._lock:
            self._due.pop(partition, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._due)

    def __contains__(self, partition: object) -> bool:
        with self._lock:
            return partition in self._due

    def run_due(self, should_stop: Callable[[], bool] = lambda: False) -> int:
        """Ask every promoted leader to recover, until ``should_stop()``; how many are done
        with it."""
        with self._lock:
            due = list(self._due.items())
        finished = 0
        for partition, promotion in due:
            if should_stop():
                break
            try:
                done = partition.recover_after_promotion()
            except NotLeaderOrFollowerError as error:  # stepped down meanwhile: not ours
                log.debug("%s: recovery after promotion ended: %s", partition.name, error)
                done = True
            except Exception as error:
                log.info(
                    "%s: recovery after promotion failed (%s: %s); the next write recovers first",
                    partition.name,
                    type(error).__name__,
                    error,
                )
                done = True
            if done:
                finished += 1
                with self._lock:
                    if self._due.get(partition) == promotion:  # not promoted again since
                        del self._due[partition]
        return finished
