"""APPLY_COMMIT / APPLY_ABORT: the per-partition single writer that copies a transaction's
journaled batches into the data log exactly once, and finishes a half-done copy after a crash.

``partition_writer`` is the writer (every append to a data log, plain or copy, goes
through its lock), ``recovery_table`` the cases a crash can leave and what each gets,
``tail`` how a copied batch is recognised in the data log. It stands on the data log and
the journals (it decides by appending journal-log records, and reads the batches back
through the LMDB index); its one user is ``engine.broker``, where each partition owns
one writer.
"""

from twinlog.copier.partition_writer import (
    CommitCall,
    PartitionWriter,
    RecoveryOutcome,
    check_invariant,
)
from twinlog.copier.recovery_table import RECOVERY_TABLE, Action, Case, lookup

__all__ = [
    "RECOVERY_TABLE",
    "Action",
    "Case",
    "CommitCall",
    "PartitionWriter",
    "RecoveryOutcome",
    "check_invariant",
    "lookup",
]
