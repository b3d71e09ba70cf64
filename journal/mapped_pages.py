"""Give back the pages of LMDB's memory map that a streaming read has touched.

Reading a value zero-copy maps its file pages into this process: copying a
1 GiB transaction would otherwise add 1 GiB to the resident set (file-backed
pages, reclaimable by the kernel, but counted in VmRSS and felt by a
container's memory limit). ``madvise(MADV_DONTNEED)`` on the map drops our page
table entries; the data stays in the page cache and a later read faults it in
again. This is safe for LMDB's map because, without ``writemap``, it is a
read-only shared file mapping: no private copy of a page can be lost.

The map is found by its file name in ``/proc/self/maps`` (LMDB reports no
map address unless opened with a fixed map). Only on Linux; elsewhere it does
nothing. The caller holds the map lock's shared side, so the map cannot be
replaced meanwhile.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

MADV_DONTNEED = 4  # <sys/mman.h> on Linux

_madvise = None
if sys.platform.startswith("linux"):
    _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    _madvise = _libc.madvise
    _madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    _madvise.restype = ctypes.c_int


def mapped_ranges(file_path: str) -> list[tuple[int, int]]:
    """(start address, bytes) of every mapping of ``file_path`` in this process."""
    ranges = []
    suffix = " " + file_path
    with open("/proc/self/maps") as maps:
        for line in maps:
            if line.rstrip("\n").endswith(suffix):
                start_text, end_text = line.split(maxsplit=1)[0].split("-")
                start = int(start_text, 16)
                ranges.append((start, int(end_text, 16) - start))
    return ranges


def release_mapped_pages(file_path: str, ranges: list[tuple[int, int]] | None = None) -> int:
    """Drop this process's mapping of the pages of ``file_path``; return the ranges released.

    ``ranges`` (from ``mapped_ranges``) must still be current: after the map is
    replaced, an old address may belong to another mapping, whose memory
    MADV_DONTNEED would wipe.
    """
    if _madvise is None:
        return 0
    released = 0
    for start, size_bytes in mapped_ranges(file_path) if ranges is None else ranges:
        if _madvise(start, size_bytes, MADV_DONTNEED) == 0:
            released += 1
    return released


ENTRIES_PER_RELEASE = 16  # with ~1 MiB folios, at most ~16 MiB mapped between releases


class PageReleaser:
    """Releases the map's pages after every ``entries_per_release`` entries touched.

    Each reader context and the writer thread use their own (it is not shared
    between threads). It caches the map's address: a reader's releaser lives
    within one hold of the map lock's shared side (no resize meanwhile), and
    the writer, the only thread that resizes, calls ``map_replaced``. Why count entries and not bytes: touching only an
    entry's first page can map far more, since the kernel maps a whole large
    page-cache folio (up to megabytes) on one fault, so a walk over a
    transaction's headers alone can map every byte of it.
    """

    def __init__(self, file_path: str, entries_per_release: int = ENTRIES_PER_RELEASE) -> None:
        self.file_path = file_path
        self.entries_per_release = entries_per_release
        self._touched = 0
        self._ranges: list[tuple[int, int]] | None = None
        self.releases = 0

    def map_replaced(self) -> None:
        """Call after a resize: the cached addresses are stale."""
        self._ranges = None

    def touched(self) -> None:
        self._touched += 1
        if self._touched >= self.entries_per_release:
            self.release()

    def release(self) -> None:
        self._touched = 0
        self.releases += 1
        if _madvise is None:
            return
        if self._ranges is None:
            self._ranges = mapped_ranges(self.file_path)
        release_mapped_pages(self.file_path, self._ranges)
