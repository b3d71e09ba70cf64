"""Units of size, defined once: every byte count in twinlog that is a round number of
them is written with these (``16 * MEBIBYTE``), never as ``1 << 20`` or ``1024 * 1024``.

A constant that means something else and happens to equal one of them keeps a name of
its own (``REPLAY_READ_BYTES = 1 * MEBIBYTE``).
"""

from __future__ import annotations

KIBIBYTE = 1 << 10
MEBIBYTE = 1 << 20
GIBIBYTE = 1 << 30
