"""APPLY_COMMIT / APPLY_ABORT: the per-partition single writer that copies a transaction's
journaled batches into the data log exactly once, and finishes a half-done copy after a crash.
"""

from twinlog.copier.partition_writer import PartitionWriter, RecoveryOutcome, check_invariant
from twinlog.copier.recovery_table import RECOVERY_TABLE, Action, Case, lookup

__all__ = [
    "RECOVERY_TABLE",
    "Action",
    "Case",
    "PartitionWriter",
    "RecoveryOutcome",
    "check_invariant",
    "lookup",
]
