"""Where a follower's log parts from its leader's (KIP-101/279/320), on real logs: the
leader answers a fetch with its end of the follower's last epoch, the follower cuts there,
and after at most a few rounds the follower's log is a prefix of the leader's."""

from __future__ import annotations

from pathlib import Path

from log_support import make_batch, read_all

from twinlog.engine.log import DataLog
from twinlog.engine.log.leader_epochs import NO_EPOCH, EpochEnd
from twinlog.engine.records.batch_reader import split_batches
from twinlog.engine.replication.divergence import diverging_epoch, truncation_offset


def _append(log: DataLog, epoch: int, count: int, tag: int) -> None:
    log.become_leader(epoch)
    for number in range(count):
        log.append_as_leader(make_batch(tag=tag * 100 + number))


def _converge(leader: DataLog, follower: DataLog, rounds_max: int = 5) -> int:
    """Fetch until the follower holds the leader's log; the rounds that truncated."""
    truncations = 0
    for _ in range(rounds_max + leader.log_end_offset):
        end = follower.log_end_offset
        last = follower.last_batch_header()
        last_epoch = NO_EPOCH if last is None else last.partition_leader_epoch
        answer = diverging_epoch(
            leader.epochs, leader.log_start_offset, leader.log_end_offset, end, last_epoch
        )
        if answer is not None:
            follower.truncate_to(truncation_offset(follower.epochs, end, answer))
            truncations += 1
            continue
        if end == leader.log_end_offset:
            return truncations
        follower.append_as_follower(split_batches(leader.read(end, 1 << 20)))
    raise AssertionError("the follower did not converge")


def _replica_of(leader: DataLog, directory: Path) -> DataLog:
    follower = DataLog.open(directory)
    follower.append_as_follower(split_batches(read_all(leader)))
    return follower


def test_a_prefix_follower_fetches_without_truncating(tmp_path: Path) -> None:
    leader = DataLog.open(tmp_path / "leader")
    _append(leader, 1, 3, 1)
    follower = DataLog.open(tmp_path / "follower")
    assert _converge(leader, follower) == 0
    _append(leader, 2, 2, 2)
    assert _converge(leader, follower) == 0
    assert read_all(follower) == read_all(leader)


def test_an_unacknowledged_suffix_of_the_old_leader_is_cut(tmp_path: Path) -> None:
    """Walkthrough 3 / F11: the old leader appended under epoch 1 what nobody fetched; the
    new leader (epoch 2) wrote other batches at those offsets."""
    old = DataLog.open(tmp_path / "old")
    _append(old, 1, 3, 1)
    new = _replica_of(old, tmp_path / "new")
    _append(old, 1, 2, 9)  # never replicated
    _append(new, 2, 4, 2)
    assert _converge(new, old) == 1
    assert read_all(old) == read_all(new)
    assert old.epochs.entries == new.epochs.entries


def test_fast_double_failover_converges_without_divergence(tmp_path: Path) -> None:
    """KIP-279: A leads epoch 1; B takes epoch 2 and writes what A never saw; C, which had
    only epoch 1, takes epoch 3. A and B both hold suffixes C never had."""
    a = DataLog.open(tmp_path / "a")
    _append(a, 1, 2, 1)
    b = _replica_of(a, tmp_path / "b")
    c = _replica_of(a, tmp_path / "c")
    _append(a, 1, 2, 7)  # A's unreplicated tail
    _append(b, 2, 3, 2)  # B's own epoch, never reached C
    _append(c, 3, 1, 3)
    for follower in (a, b):
        _converge(c, follower)
        assert read_all(follower) == read_all(c)
        assert follower.epochs.entries == c.epochs.entries


def test_the_answers_at_the_edges() -> None:
    class History:
        def __init__(self, entries: list[tuple[int, int]]) -> None:
            self.entries = entries

        def end_offset_for_epoch(self, epoch: int, log_end_offset: int) -> EpochEnd:
            older = [(e, s) for e, s in self.entries if e <= epoch]
            if not older:
                return EpochEnd(NO_EPOCH, -1)
            position = self.entries.index(older[-1])
            if position == len(self.entries) - 1:
                return EpochEnd(older[-1][0], log_end_offset)
            return EpochEnd(older[-1][0], self.entries[position + 1][1])

    leader = History([(3, 10), (5, 20)])
    assert diverging_epoch(leader, 10, 30, 0, NO_EPOCH) is None  # an empty follower
    assert diverging_epoch(leader, 10, 30, 25, 5) is None
    assert diverging_epoch(leader, 10, 30, 31, 5) == (5, 30)  # past our end
    assert diverging_epoch(leader, 10, 30, 22, 4) == (3, 20)  # an epoch we never had
    assert diverging_epoch(leader, 10, 30, 8, 1) == (NO_EPOCH, 10)  # older than our history
    assert diverging_epoch(leader, 10, 30, 12, 1) == (NO_EPOCH, 10)
    assert diverging_epoch(leader, 10, 30, 10, 1) is None  # it ends where we start
    follower = History([(3, 10), (4, 18)])
    assert truncation_offset(follower, 22, EpochEnd(3, 20)) == 18  # cut our epoch 4 first
    assert truncation_offset(follower, 22, EpochEnd(NO_EPOCH, 10)) == 10
    assert truncation_offset(History([(6, 0)]), 9, EpochEnd(5, 4)) == 4
