"""Model-based test: random keyed appends (tombstones too), rolls, compactions, time passing,
interrupted compactions and reopens, checked after every step against a dict.

Invariants: each live key's latest record in the log is the one the model says (same
value, same offset); a key whose latest write is a tombstone has no live value; batch
offsets are contiguous from the log start to the log end, which never moves back.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from test_log_compaction import (
    DAY_MS,
    active_size_bytes,
    all_batches,
    check_contiguous,
    compacted,
    keyed_batch,
    roll,
)

from twinlog.engine.base import failpoints
from twinlog.engine.base.failpoints import FailpointError
from twinlog.engine.log import DataLog, compact

KEYS = [b"a", b"b", b"c", b"d", b"e", b"f"]
FAILPOINTS = [
    "compaction.after_cleaned_batch",
    "compaction.after_write_cleaned",
    "compaction.after_commit",
    "compaction.after_delete_replaced",
    "compaction.before_rename_segment",
    "compaction.after_swap",
]
START_MS = 1_700_000_000_000

writes_strategy = st.lists(
    st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.binary(min_size=0, max_size=12))),
    min_size=1,
    max_size=5,
)


class CompactedLogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.directory = Path(tempfile.mkdtemp(prefix="compaction-model-"))
        self.config = compacted(segment_bytes=400, index_interval_bytes=100)
        self.log = DataLog.open(self.directory, self.config)
        self.now_ms = START_MS
        self.latest: dict[bytes, tuple[int, bytes | None]] = {}  # key -> (offset, value)
        self.next_offset = 0

    def teardown(self) -> None:
        failpoints.disarm_all()
        self.log.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    @rule(writes=writes_strategy, zstd=st.booleans())
    def append(self, writes: list[tuple[bytes, bytes | None]], zstd: bool) -> None:
        batch = keyed_batch(list(writes), "zstd" if zstd else "none", timestamp_ms=self.now_ms)
        assert self.log.append_as_leader(batch) == self.next_offset
        for key, value in writes:
            self.latest[key] = (self.next_offset, value)
            self.next_offset += 1

    @precondition(lambda self: active_size_bytes(self.log) > 0)
    @rule()
    def roll(self) -> None:
        roll(self.log)

    @rule(days=st.sampled_from([0, 0, 2]))
    def compact(self, days: int) -> None:
        self.now_ms += days * DAY_MS  # two days: every tombstone so far may go
        report = compact(self.log, self.now_ms)
        event("compaction replaced segments" if report.segments_replaced else "compaction idle")
        if report.tombstones_dropped:
            event("compaction dropped tombstones")
        if report.batches_rewritten:
            event("compaction rewrote batches")

    @rule()
    def reopen(self) -> None:
        self.log.close()
        self.log = DataLog.open(self.directory, self.config)

    @rule(point=st.sampled_from(FAILPOINTS))
    def interrupted_compaction_then_reopen(self, point: str) -> None:
        failpoints.arm(point, "raise")
        try:
            compact(self.log, self.now_ms)
        except FailpointError:
            event(f"interrupted at {point}")  # else: nothing to compact, the point not reached
        finally:
            failpoints.disarm_all()
        self.log.close()
        self.log = DataLog.open(self.directory, self.config)
        assert not [p for p in self.directory.iterdir() if p.suffix in (".cleaned", ".swap")]

    @invariant()
    def latest_records_are_the_models(self) -> None:
        found: dict[bytes, tuple[int, bytes | None]] = {}
        for _, records in all_batches(self.log) if self.log.log_end_offset else []:
            for record in records:
                assert record.key is not None
                found[record.key] = (record.offset, record.value)
        for key, (offset, value) in self.latest.items():
            if value is None:  # a deletion: kept for a while, then gone with its key
                assert found.get(key, (offset, None)) == (offset, None), key
            else:
                assert found.get(key) == (offset, value), key
        assert set(found) <= set(self.latest)

    @invariant()
    def offsets_are_contiguous(self) -> None:
        assert self.log.log_end_offset == self.next_offset
        if self.next_offset:
            check_contiguous(self.log)


TestCompactedLog = pytest.mark.slow(CompactedLogMachine.TestCase)
TestCompactedLog.settings = settings(
    max_examples=40,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
