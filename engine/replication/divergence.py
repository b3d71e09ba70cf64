"""Where a follower's log parts from its leader's, by leader epoch (KIP-101, KIP-279, KIP-320).

A follower never truncates to its own high watermark (KAFKA-1211 lost acknowledged
records that way); it truncates where the epochs say the logs differ. Each fetch carries
the follower's last fetched epoch; the leader answers, instead of records, its own end of
that epoch when the follower holds something the leader does not:

    leader:   diverging_epoch(leader epochs, leader end, fetch_offset, last_fetched_epoch)
                -> EpochEnd(epoch, end) or None (no divergence: send records)
    follower: truncation_offset(follower epochs, follower end, EpochEnd)
                -> the offset to truncate to (a batch boundary in both logs)

When the follower does not know the epoch the leader answered with, it cuts to the end
of its own largest epoch below it and asks again (its next fetch carries that epoch):
each round cuts at least one epoch off, so the rounds end (KIP-279: no divergence after
fast double failovers).
"""

from __future__ import annotations

from typing import Protocol

from twinlog.engine.log.leader_epochs import NO_EPOCH, EpochEnd


class EpochHistory(Protocol):
    """A log's leader-epoch checkpoint (``LeaderEpochCache``)."""

    def end_offset_for_epoch(self, epoch: int, log_end_offset: int) -> EpochEnd: ...


def diverging_epoch(
    leader_epochs: EpochHistory,
    leader_log_start_offset: int,
    leader_log_end_offset: int,
    fetch_offset: int,
    last_fetched_epoch: int,
) -> EpochEnd | None:
    """The leader's answer to a fetch at ``fetch_offset`` whose last batch had
    ``last_fetched_epoch``: None when the follower's log is a prefix of ours, else where
    ours ends for that epoch (Kafka's divergingEpoch)."""
    if last_fetched_epoch == NO_EPOCH:
        return None  # an empty follower log parts from nothing
    epoch_end = leader_epochs.end_offset_for_epoch(last_fetched_epoch, leader_log_end_offset)
    if epoch_end.epoch == NO_EPOCH:
        if fetch_offset == leader_log_start_offset:
            # Its log ends where ours starts (records deleted up to our end after a
            # failover, and our epochs older than the start with them): there is nothing
            # to compare, so nothing to cut, and records from our start follow. Answering
            # a divergence here would be answered again at every fetch: the follower,
            # with nothing to cut, would ask with the same epoch forever (Kafka answers
            # the epoch asked about, ending where our earliest one starts).
            return None
        # We know no epoch that old: the follower holds epochs we never had, from before
        # our log start; it keeps nothing past our start.
        return EpochEnd(NO_EPOCH, leader_log_start_offset)
    if epoch_end.epoch < last_fetched_epoch or epoch_end.end_offset < fetch_offset:
        return epoch_end
    return None


def truncation_offset(
    follower_epochs: EpochHistory, follower_log_end_offset: int, leader_answer: EpochEnd
) -> int:
    """Where a follower cuts its log after the leader answered ``leader_answer``."""
    if leader_answer.epoch == NO_EPOCH:
        return min(leader_answer.end_offset, follower_log_end_offset)
    ours = follower_epochs.end_offset_for_epoch(leader_answer.epoch, follower_log_end_offset)
    if ours.epoch == NO_EPOCH:  # we hold no epoch that old: keep nothing past the leader's
        return min(leader_answer.end_offset, follower_log_end_offset)
    if ours.epoch != leader_answer.epoch:
        # We never had the leader's epoch: cut to where our largest epoch below it ends;
        # the next fetch (last fetched epoch = that one) asks again.
        return min(ours.end_offset, follower_log_end_offset)
    return min(leader_answer.end_offset, ours.end_offset, follower_log_end_offset)
