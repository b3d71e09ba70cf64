"""A hypothesis state machine over the journal and copier of several partitions.

Random interleavings of transactional appends, plain appends, commits,
aborts, duplicate and crossed decisions, late appends, copies that fail half
way, purges and restarts (close and reopen everything). After every step each
data log must equal the model: committed transactions' batches in apply order,
each once and contiguous, plain batches where they were appended, nothing of
aborted ones; and the journal must hold exactly the open transactions' entries.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from copier_support import body, log_bodies, plain_batch, transactional_batch
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from twinlog.copier import PartitionWriter
from twinlog.engine.base import failpoints
from twinlog.engine.base.errors import InvalidTxnStateError, TransactionCompletedError
from twinlog.engine.log import DataLog, LogConfig
from twinlog.journal import JournalConfig, JournalLogs, LocalJournal

PARTITIONS = ("orders-0", "orders-1", "audit-0")
OPEN_MAX = 4


class CopierMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        failpoints.disarm_all()
        self.directory = Path(tempfile.mkdtemp(prefix="copier-machine-"))
        # small segments and a small map: rolls and map growth happen in most runs
        self.log_config = LogConfig(segment_bytes=2048)
        self.journal_config = JournalConfig(map_size_bytes=64 * 1024)
        self._open()
        # the model
        self.log_model: dict[str, list[bytes]] = {p: [] for p in PARTITIONS}
        self.journaled: dict[tuple[str, int], list[bytes]] = {}
        self.open_ids: list[int] = []
        self.decided: dict[int, str] = {}  # transaction id -> "commit" | "abort"
        self.forgotten: set[int] = set()  # purged: the journal no longer knows them
        self.pending: dict[str, int] = {}  # partition -> transaction whose copy failed half way
        self.next_id = 1
        self.sequence: dict[int, int] = {}
        self.plain_tag = 0

    def _open(self) -> None:
        self.journal = JournalLogs(
            LocalJournal.open(self.directory / "journal", self.journal_config)
        )
        self.logs = {
            p: DataLog.open(self.directory / "logs" / p, self.log_config) for p in PARTITIONS
        }
        for partition in PARTITIONS:  # replays what LMDB has not applied
            self.journal.open_partition(partition, self.directory / "logs" / partition)
        self.writers = {p: PartitionWriter(p, self.logs[p], self.journal) for p in PARTITIONS}
        for writer in self.writers.values():
            writer.recover()

    def _close(self) -> None:
        for data_log in self.logs.values():
            data_log.close()
        self.journal.close()

    def teardown(self) -> None:
        failpoints.disarm_all()
        self._close()
        shutil.rmtree(self.directory, ignore_errors=True)

    # --- model helpers ----------------------------------------------------------

    def _finish_pending(self, partition: str) -> None:
        """The model of 'a write first finishes the copy that failed half way'."""
        transaction_id = self.pending.pop(partition, None)
        if transaction_id is not None:
            self.log_model[partition] += [
                body(b) for b in self.journaled.pop((partition, transaction_id), [])
            ]

    def _apply(self, partition: str, transaction_id: int, decision: str) -> None:
        self._finish_pending(partition)
        batches = self.journaled.pop((partition, transaction_id), [])
        if decision == "commit" and transaction_id not in self.forgotten:
            self.log_model[partition] += [body(b) for b in batches]

    # --- rules ------------------------------------------------------------------

    @precondition(lambda self: len(self.open_ids) < OPEN_MAX)
    @rule()
    def begin(self) -> None:
        self.open_ids.append(self.next_id)
        self.sequence[self.next_id] = 0
        self.next_id += 1

    @precondition(lambda self: self.open_ids)
    @rule(
        data=st.data(),
        partition=st.sampled_from(PARTITIONS),
        records=st.integers(1, 3),
        value_bytes=st.sampled_from([10, 300]),
    )
    def append(self, data: st.DataObject, partition: str, records: int, value_bytes: int) -> None:
        transaction_id = data.draw(st.sampled_from(self.open_ids))
        batch = transactional_batch(
            transaction_id, self.sequence[transaction_id], records, value_bytes
        )
        self.sequence[transaction_id] += records
        self.journal.append(partition, transaction_id, batch)
        self.journaled.setdefault((partition, transaction_id), []).append(batch)

    @rule(partition=st.sampled_from(PARTITIONS))
    def append_plain(self, partition: str) -> None:
        batch = plain_batch(self.plain_tag)
        self.plain_tag += 1
        self._finish_pending(partition)
        self.writers[partition].append_plain(batch)
        self.log_model[partition].append(body(batch))

    @precondition(lambda self: self.open_ids)
    @rule(data=st.data(), decision=st.sampled_from(["commit", "abort"]))
    def decide(self, data: st.DataObject, decision: str) -> None:
        transaction_id = data.draw(st.sampled_from(self.open_ids))
        self.open_ids.remove(transaction_id)
        self.decided[transaction_id] = decision
        for partition in PARTITIONS:  # the coordinator tells every partition
            if decision == "commit":
                self.writers[partition].apply_commit(transaction_id)
            else:
                self.writers[partition].apply_abort(transaction_id)
            self._apply(partition, transaction_id, decision)

    @precondition(lambda self: self.open_ids)
    @rule(data=st.data(), failing=st.sampled_from(PARTITIONS), on_batch=st.integers(1, 3))
    def commit_failing_half_way(self, data: st.DataObject, failing: str, on_batch: int) -> None:
        transaction_id = data.draw(st.sampled_from(self.open_ids))
        self.open_ids.remove(transaction_id)
        self.decided[transaction_id] = "commit"
        for partition in PARTITIONS:
            writer = self.writers[partition]
            if partition != failing:
                writer.apply_commit(transaction_id)
                self._apply(partition, transaction_id, "commit")
                continue
            # The writer finishes an earlier half-done copy first; do it before arming the
            # failpoint, whose hit count would otherwise include that copy's batches.
            if partition in self.pending:
                writer.recover()
            self._finish_pending(partition)
            copies = len(self.journaled.get((partition, transaction_id), []))
            failpoints.arm("copier.after_batch", "raise", on_hit=on_batch)
            try:
                if copies >= on_batch:
                    with pytest.raises(failpoints.FailpointError):
                        writer.apply_commit(transaction_id)
                    self.pending[partition] = transaction_id
                else:
                    writer.apply_commit(transaction_id)
                    self._apply(partition, transaction_id, "commit")
            finally:
                failpoints.disarm_all()

    @precondition(lambda self: self.decided)
    @rule(data=st.data())
    def redeliver(self, data: st.DataObject) -> None:
        transaction_id = data.draw(st.sampled_from(sorted(self.decided)))
        decision = self.decided[transaction_id]
        for partition in PARTITIONS:
            if decision == "commit":
                self.writers[partition].apply_commit(transaction_id)
            else:
                self.writers[partition].apply_abort(transaction_id)
            self._apply(partition, transaction_id, decision)

    @precondition(lambda self: set(self.decided) - self.forgotten)
    @rule(data=st.data())
    def crossed_decision(self, data: st.DataObject) -> None:
        transaction_id = data.draw(st.sampled_from(sorted(set(self.decided) - self.forgotten)))
        for partition in PARTITIONS:
            self._finish_pending(partition)
            with pytest.raises(InvalidTxnStateError):
                if self.decided[transaction_id] == "commit":
                    self.writers[partition].apply_abort(transaction_id)
                else:
                    self.writers[partition].apply_commit(transaction_id)

    @precondition(lambda self: self.decided)
    @rule(data=st.data(), partition=st.sampled_from(PARTITIONS))
    def late_append(self, data: st.DataObject, partition: str) -> None:
        transaction_id = data.draw(st.sampled_from(sorted(self.decided)))
        with pytest.raises(TransactionCompletedError):
            self.journal.append(partition, transaction_id, transactional_batch(transaction_id, 999))

    @rule()
    def purge(self) -> None:
        # The coordinators' low watermark: no open or unfinished commit at or above it is lost.
        watermark = min([*self.open_ids, *self.pending.values(), self.next_id])
        self.journal.purge_below(watermark)
        for transaction_id in self.decided:
            if transaction_id < watermark:
                self.forgotten.add(transaction_id)

    @rule()
    def restart(self) -> None:
        self._close()
        self._open()
        for partition in PARTITIONS:
            self._finish_pending(partition)

    # --- invariants -------------------------------------------------------------

    @invariant()
    def logs_equal_the_model(self) -> None:
        for partition in PARTITIONS:
            assert log_bodies(self.logs[partition]) == self.log_model[partition], partition

    @invariant()
    def journal_holds_exactly_the_undecided_entries(self) -> None:
        self.journal.check()
        expected: dict[str, tuple[int, int]] = {}
        for (partition, _), batches in self.journaled.items():
            if batches:
                entries, size = expected.get(partition, (0, 0))
                expected[partition] = (entries + len(batches), size + sum(map(len, batches)))
        assert self.journal.statistics().pending_by_partition == expected


CopierMachine.TestCase.settings = settings(
    max_examples=30,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_copier_state_machine = pytest.mark.slow(CopierMachine.TestCase)
