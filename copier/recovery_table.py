"""What the copier does at open with each transaction, as a table of cases.

A crash can stop a copy anywhere. At open, for each transaction of the
partition, three facts are gathered and looked up here:

    record  the transaction index row        ABSENT OPEN APPLYING APPLIED ABORTED
    chain   its journal entries               INTACT (reverse walk matches the index) or BROKEN
    tail    the data log from the APPLYING    BEYOND   start > log end: the log came back shorter
            start offset, compared with the   EMPTY    log end == start: nothing of ours copied
            journal's batches (header fields  PREFIX   a proper, non-empty prefix of our whole
            inside the CRC: length, CRC,               batches is there, ending on a batch boundary
            producer id/generation/sequence,  TORN     a prefix of ours whose last batch is cut
            record count; the CRC covers all  short (the data log's recovery normally
            but offset, length, epoch, magic)          cuts such a batch at open)
                                              WHOLE    exactly all of ours, up to the log end
                                              FOREIGN  something else is there (or start is below
                                                       the log start: it cannot be compared)

Every combination matches exactly one row (``test_copier_recovery_table``
enumerates them). Only APPLYING can mean a half-done copy: the copier appends
MARK_APPLYING to the journal log and applies it before it copies a byte (J4),
and MARK_APPLIED (deleting the entries) after the data log's fsync.

J6 (resume, don't truncate): a PREFIX of whole batches may have been read by
consumers (in a cluster: it is committed), so the copy resumes after it;
only a TORN prefix is cut back to the start and copied again. Rows are tried in order
only for readability; conditions do not overlap.

``CopyRecordState`` is the index row's ``CopyState`` (the local journal's copy of one
transaction on one partition), plus ABSENT for no row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum


class CopyRecordState(Enum):
    ABSENT = "absent"
    OPEN = "OPEN"
    APPLYING = "APPLYING"
    APPLIED = "APPLIED"
    ABORTED = "ABORTED"


class ChainState(Enum):
    INTACT = "intact"
    BROKEN = "broken"


class TailState(Enum):
    BEYOND = "beyond"
    EMPTY = "empty"
    PREFIX = "prefix"
    TORN = "torn"
    WHOLE = "whole"
    FOREIGN = "foreign"


class Action(Enum):
    NOTHING = "nothing"
    COPY = "copy"
    TRUNCATE_AND_COPY = "truncate the log to the start, then copy"
    RESUME_COPY = "copy the remaining batches after the prefix"
    RESTART_AND_COPY = "record APPLYING at the log end, then copy"
    RECORD_APPLIED = "record APPLIED and delete the entries"
    REFUSE = "refuse to open the partition (CorruptJournalError)"


@dataclass(frozen=True)
class Case:
    record: CopyRecordState
    chain: ChainState
    tail: TailState


@dataclass(frozen=True)
class Row:
    name: str
    condition: Callable[[Case], bool]
    action: Action
    why: str


def _applying(chain: ChainState, tail: TailState | None = None) -> Callable[[Case], bool]:
    def condition(case: Case) -> bool:
        return (
            case.record is CopyRecordState.APPLYING
            and case.chain is chain
            and (tail is None or case.tail is tail)
        )

    return condition


RECOVERY_TABLE: tuple[Row, ...] = (
    Row(
        "not applying",
        lambda case: case.record is not CopyRecordState.APPLYING,
        Action.NOTHING,
        "OPEN waits for the coordinator's decision; APPLIED and ABORTED are final (their "
        "entries went in the same LMDB transaction); ABSENT has nothing here. A redelivered "
        "APPLY_* is answered from the record.",
    ),
    Row(
        "damaged chain",
        _applying(ChainState.BROKEN),
        Action.REFUSE,
        "the reverse links do not lead through the index's entries: the journal is damaged, "
        "and copying a part would break atomicity",
    ),
    Row(
        "log lost its tail",
        _applying(ChainState.INTACT, TailState.BEYOND),
        Action.RESTART_AND_COPY,
        "the log ends below the recorded start (it lost unsynced batches, ours included if "
        "any were written): none of ours is left, so start again at the new end",
    ),
    Row(
        "nothing copied",
        _applying(ChainState.INTACT, TailState.EMPTY),
        Action.COPY,
        "the crash came between the APPLYING record and the first batch (or the log "
        "recovery cut every batch of ours)",
    ),
    Row(
        "prefix of whole batches",
        _applying(ChainState.INTACT, TailState.PREFIX),
        Action.RESUME_COPY,
        "whole batches of the copy are in the log (readers may have seen them): append the "
        "remaining ones after them (contiguous, exactly once; J6)",
    ),
    Row(
        "torn copy",
        _applying(ChainState.INTACT, TailState.TORN),
        Action.TRUNCATE_AND_COPY,
        "the copy's last batch in the log is cut short: cut the log back to the start, copy "
        "all again (contiguous, exactly once)",
    ),
    Row(
        "whole copy",
        _applying(ChainState.INTACT, TailState.WHOLE),
        Action.RECORD_APPLIED,
        "the copy and its fsync finished; the crash came before APPLIED was recorded",
    ),
    Row(
        "foreign tail",
        _applying(ChainState.INTACT, TailState.FOREIGN),
        Action.REFUSE,
        "the log holds batches that are not this transaction's after its start: the "
        "single-writer rule was broken or a file was replaced; an operator must decide",
    ),
)


def all_cases() -> list[Case]:
    return [Case(r, c, t) for r in CopyRecordState for c in ChainState for t in TailState]


def lookup(case: Case) -> Row:
    """The one row whose condition holds; AssertionError if none or several (a table bug)."""
    matching = [row for row in RECOVERY_TABLE if row.condition(case)]
    assert len(matching) == 1, f"recovery table: {case} matches {[row.name for row in matching]}"
    return matching[0]


def describe_table() -> str:
    """The table as text (for docs and logs)."""
    lines = [f"{'row':<20} {'action':<45} why"]
    lines += [f"{row.name:<20} {row.action.value:<45} {row.why}" for row in RECOVERY_TABLE]
    return "\n".join(lines)
