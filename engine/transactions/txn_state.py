"""The transaction state machine, as a table.

Each state lists the states it may be entered from (as Kafka's
TransactionMetadata does); each event a producer or the coordinator can raise
is a row saying, per current state, what happens. A change is written to the
transaction journal first and applied to memory after (``twinlog.engine.transactions.coordinator``).

    state            entered from            journal record
    ONGOING          (begin), ONGOING        BEGIN, ADD_PARTITIONS, ADD_OFFSETS
    PREPARE_COMMIT   ONGOING                 PREPARE_COMMIT
    PREPARE_ABORT    ONGOING                 PREPARE_ABORT
    COMMITTED        PREPARE_COMMIT          COMMITTED
    ABORTED          PREPARE_ABORT           ABORTED

Events per state (``->`` a transition, ``ok`` an idempotent no-op answered
with success, ``error`` an InvalidTxnStateError naming both states):

    event \\ state     ONGOING          PREPARE_COMMIT  PREPARE_ABORT   COMMITTED  ABORTED
    add_partitions    -> ONGOING       error           error           error      error
    add_offsets       -> ONGOING       error           error           error      error
    send              -> ONGOING       error           error           error      error
    commit            -> PREP_COMMIT   ok (retry)      error           ok (retry) error
    abort             -> PREP_ABORT    error           ok (retry)      error      ok (retry)
    timeout           -> PREP_ABORT    ok (ignored)    ok (ignored)    ok         ok
    complete_commit   error            -> COMMITTED    error           ok         error
    complete_abort    error            error           -> ABORTED      error      ok

A retried commit of a transaction already committing answers success: the
first answer may have been lost, and the commit is guaranteed either way.

Names: ``TransactionState`` and ``TransactionEvent`` are the coordinator's, for the whole
transaction; the local journal's state of one transaction on one partition is ``CopyState``.
"""

from __future__ import annotations

from enum import Enum

from twinlog.engine.base.errors import InvalidTxnStateError
from twinlog.engine.base.types import TransactionState

ONGOING = TransactionState.ONGOING
PREPARE_COMMIT = TransactionState.PREPARE_COMMIT
PREPARE_ABORT = TransactionState.PREPARE_ABORT
COMMITTED = TransactionState.COMMITTED
ABORTED = TransactionState.ABORTED

VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState | None]] = {
    ONGOING: frozenset({None, ONGOING}),
    PREPARE_COMMIT: frozenset({ONGOING}),
    PREPARE_ABORT: frozenset({ONGOING}),
    COMMITTED: frozenset({PREPARE_COMMIT}),
    ABORTED: frozenset({PREPARE_ABORT}),
}


class TransactionEvent(Enum):
    ADD_PARTITIONS = "add_partitions"
    ADD_OFFSETS = "add_offsets"
    SEND = "send"
    COMMIT = "commit"
    ABORT = "abort"
    TIMEOUT = "timeout"
    COMPLETE_COMMIT = "complete_commit"
    COMPLETE_ABORT = "complete_abort"


class Outcome(Enum):
    """What an event does in a state: move to a new state, succeed doing nothing, or fail."""

    NO_OP = "ok"
    ERROR = "error"


Result = TransactionState | Outcome
E = Outcome.ERROR
OK = Outcome.NO_OP

# The table above, as data. Columns in the order of TransactionState.
_COLUMNS = (ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMMITTED, ABORTED)
_ROWS: dict[TransactionEvent, tuple[Result, Result, Result, Result, Result]] = {
    TransactionEvent.ADD_PARTITIONS: (ONGOING, E, E, E, E),
    TransactionEvent.ADD_OFFSETS: (ONGOING, E, E, E, E),
    TransactionEvent.SEND: (ONGOING, E, E, E, E),
    TransactionEvent.COMMIT: (PREPARE_COMMIT, OK, E, OK, E),
    TransactionEvent.ABORT: (PREPARE_ABORT, E, OK, E, OK),
    TransactionEvent.TIMEOUT: (PREPARE_ABORT, OK, OK, OK, OK),
    TransactionEvent.COMPLETE_COMMIT: (E, COMMITTED, E, OK, E),
    TransactionEvent.COMPLETE_ABORT: (E, E, ABORTED, E, OK),
}
TRANSITIONS: dict[tuple[TransactionEvent, TransactionState], Result] = {
    (event, state): result
    for event, row in _ROWS.items()
    for state, result in zip(_COLUMNS, row, strict=True)
}

# Every transition the table makes must be one the state allows (checked at import).
for (_event, _state), _result in TRANSITIONS.items():
    if isinstance(_result, TransactionState):
        assert _state in VALID_PREVIOUS_STATES[_result], (_event, _state, _result)

_HINTS = {
    COMMITTED: "the transaction is already committed; begin a new one",
    ABORTED: "the transaction was aborted (by the producer, a newer generation, an admin, "
    "or its timeout); begin a new one and send its records again",
    PREPARE_COMMIT: "the transaction is being committed; wait for the commit to finish",
    PREPARE_ABORT: "the transaction is being aborted; begin a new one",
    ONGOING: "the transaction is still open; commit or abort it first",
}


def next_state(transaction_id: int, state: TransactionState, event: TransactionEvent) -> Result:
    """The table's answer for ``event`` in ``state``; raises InvalidTxnStateError for ``error``."""
    result = TRANSITIONS[(event, state)]
    if result is Outcome.ERROR:
        raise InvalidTxnStateError(
            f"cannot {event.value.replace('_', ' ')} transaction {transaction_id}: it is "
            f"{state.value}; {_HINTS[state]}"
        )
    return result
