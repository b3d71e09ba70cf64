"""CRC-32C (Castagnoli), the checksum of every record batch.

We use crcmod's predefined ``crc-32c``. crcmod ships a C extension that is
compiled on install; without it crcmod silently falls back to pure Python,
which is about 45x slower and would make every produce and recovery crawl.
So we check once, at import, and warn loudly (and expose the fact so that
``twinlog`` commands and benchmarks can print it).

Check value (RFC 3720, B.4): ``crc32c(b"123456789") == 0xE3069283``.
"""

from __future__ import annotations

import importlib
import warnings

import crcmod.predefined

# The package re-exports names from its module crcmod.crcmod, which holds the flag.
_crcmod_impl = importlib.import_module("crcmod.crcmod")

CHECK_INPUT = b"123456789"
CHECK_VALUE = 0xE3069283

# crcmod's flag for "the C extension was importable"; private, so read defensively.
USING_C_EXTENSION: bool = bool(getattr(_crcmod_impl, "_usingExtension", False))

if not USING_C_EXTENSION:
    warnings.warn(
        "twinlog: crcmod is running WITHOUT its C extension (pure-Python fallback, ~45x "
        "slower). Reinstall it with a C compiler and Python headers available: "
        "pip install --force-reinstall --no-binary crcmod crcmod",
        RuntimeWarning,
        stacklevel=2,
    )

_crc32c_function = crcmod.predefined.mkCrcFun("crc-32c")


def crc32c(data: bytes | bytearray | memoryview, previous_crc: int = 0) -> int:
    """CRC-32C of ``data`` as an unsigned 32-bit int.

    ``previous_crc`` continues a CRC over pieces: crc32c(b, crc32c(a)) == crc32c(a + b).
    """
    return _crc32c_function(data, previous_crc)


# A plain check, not an assert: ``python -O`` strips asserts, and a wrong CRC would
# make every batch look corrupt (or every corrupt batch look fine).
if crc32c(CHECK_INPUT) != CHECK_VALUE:
    raise ImportError(
        f"crcmod's crc-32c gives 0x{crc32c(CHECK_INPUT):08x} for {CHECK_INPUT!r}, expected "
        f"0x{CHECK_VALUE:08x} (RFC 3720): this crcmod is broken or not the real one. "
        "Reinstall it: pip install --force-reinstall --no-binary crcmod crcmod"
    )
