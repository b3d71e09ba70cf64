"""CRC-32C (Castagnoli), the checksum of every record batch.

Two implementations, the same function:

* **google-crc32c** (optional, ``pip install 'twinlog[fast]'``, in ``[all]``): Google's
  hardware-accelerated CRC-32C (SSE4.2 / ARMv8 CRC instructions), about 50x faster
  than crcmod here (≈ 18 GB/s against ≈ 380 MB/s on 64 KiB). Chosen over the
  ``crc32c`` package because it is Apache-2.0, as twinlog is (``crc32c`` is LGPL);
  its C function takes ``bytes`` only, so other buffers are copied first (a memcpy is
  ~20x cheaper than crcmod's CRC of the same bytes). Used only when its compiled
  extension loaded (``google_crc32c.implementation == "c"``): its pure-Python
  fallback is slower than crcmod.
* **crcmod** (required): the reference. The tests compare the two on pinned and
  random inputs. crcmod ships a C extension compiled on install; without it it
  silently falls back to pure Python, ~45x slower, so we check once, at import,
  and warn loudly.

``IMPLEMENTATION`` names the one in use; ``twinlog serve`` prints it at start-up.
``TWINLOG_CRC32C=crcmod`` in the environment forces the reference (to measure it).

Check value (RFC 3720, B.4): ``crc32c(b"123456789") == 0xE3069283``.
"""

from __future__ import annotations

import importlib
import os
import warnings
from collections.abc import Callable

import crcmod.predefined

# The package re-exports names from its module crcmod.crcmod, which holds the flag.
_crcmod_impl = importlib.import_module("crcmod.crcmod")

CHECK_INPUT = b"123456789"
CHECK_VALUE = 0xE3069283
FORCE_REFERENCE_ENV = "TWINLOG_CRC32C"

# crcmod's flag for "the C extension was importable"; private, so read defensively.
USING_C_EXTENSION: bool = bool(getattr(_crcmod_impl, "_usingExtension", False))

_reference_function = crcmod.predefined.mkCrcFun("crc-32c")


def reference_crc32c(data: bytes | bytearray | memoryview, previous_crc: int = 0) -> int:
    """crcmod's CRC-32C: what ``crc32c`` must equal on every input."""
    return _reference_function(data, previous_crc)


def _load_hardware() -> Callable[[int, bytes], int] | None:
    """google-crc32c's ``extend(crc, data)`` if installed with its C extension, else None."""
    if os.environ.get(FORCE_REFERENCE_ENV, "") == "crcmod":
        return None
    try:
        import google_crc32c
    except ImportError:
        return None
    if getattr(google_crc32c, "implementation", "") != "c":
        return None
    extend: Callable[[int, bytes], int] = google_crc32c.extend
    return extend


_hardware_extend = _load_hardware()

if _hardware_extend is not None:
    IMPLEMENTATION = "google-crc32c (hardware)"
elif USING_C_EXTENSION:
    IMPLEMENTATION = "crcmod C extension"
else:
    IMPLEMENTATION = "crcmod pure Python, SLOW"
    warnings.warn(
        "twinlog: crcmod is running WITHOUT its C extension (pure-Python fallback, ~45x "
        "slower). Install the fast CRC (pip install 'twinlog[fast]'), or reinstall crcmod "
        "with a C compiler and Python headers available: "
        "pip install --force-reinstall --no-binary crcmod crcmod",
        RuntimeWarning,
        stacklevel=2,
    )


def crc32c(data: bytes | bytearray | memoryview, previous_crc: int = 0) -> int:
    """CRC-32C of ``data`` as an unsigned 32-bit int.

    ``previous_crc`` continues a CRC over pieces: crc32c(b, crc32c(a)) == crc32c(a + b).
    """
    if _hardware_extend is None:
        return _reference_function(data, previous_crc)
    return _hardware_extend(previous_crc, data if type(data) is bytes else bytes(data))


# A plain check, not an assert: ``python -O`` strips asserts, and a wrong CRC would
# make every batch look corrupt (or every corrupt batch look fine).
for _name, _function in (("crcmod", reference_crc32c), (IMPLEMENTATION, crc32c)):
    if _function(CHECK_INPUT) != CHECK_VALUE:
        raise ImportError(
            f"{_name}'s crc-32c gives 0x{_function(CHECK_INPUT):08x} for {CHECK_INPUT!r}, "
            f"expected 0x{CHECK_VALUE:08x} (RFC 3720): this package is broken or not the real "
            "one. Reinstall it: pip install --force-reinstall --no-binary crcmod crcmod "
            "google-crc32c"
        )
