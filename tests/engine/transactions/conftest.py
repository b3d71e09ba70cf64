"""Tests of ``twinlog.engine.transactions``: the transaction coordinator (its request API,
replay and checkpoints, the completion worker, the slots) and the seam calls it makes."""
