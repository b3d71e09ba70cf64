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
import threading

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


class MapAddresses:
    """Where the map of one file lies, looked up once per map and shared by its users.

    Reading ``/proc/self/maps`` costs about a millisecond in a process with many
    threads and libraries, so the ranges are cached until ``map_replaced``. The
    cache is only as current as its users' discipline: readers use it while
    holding the map lock's shared side, and the one thread that replaces the map
    (the journal's writer, under the exclusive side) calls ``map_replaced``.
    """

    def __init__(self, file_path: str) -> None:
        self.file_path = file_path
        self._lock = threading.Lock()
        self._ranges: list[tuple[int, int]] | None = None

    def ranges(self) -> list[tuple[int, int]]:
        with self._lock:
            if self._ranges is None:
                self._ranges = mapped_ranges(self.file_path)
            return self._ranges

    def map_replaced(self) -> None:
        with self._lock:
            self._ranges = None


ENTRIES_PER_RELEASE = 16  # with ~1 MiB folios, at most ~16 MiB mapped between releases


class PageReleaser:
    """Releases the map's pages after every ``entries_per_release`` entries touched.

    Each reader context and the writer thread use their own (it is not shared
    between threads); the map's address comes from the journal's shared
    ``MapAddresses`` (see there for why it stays current). Why count entries and not bytes: touching only an
    entry's first page can map far more, since the kernel maps a whole large
    page-cache folio (up to megabytes) on one fault, so a walk over a
    transaction's headers alone can map every byte of it.
    """

    def __init__(
        self, addresses: MapAddresses, entries_per_release: int = ENTRIES_PER_RELEASE
    ) -> None:
        self.addresses = addresses
        self.entries_per_release = entries_per_release
        self._touched = 0
        self.releases = 0

    def touched(self) -> None:
        self._touched += 1
        if self._touched >= self.entries_per_release:
            self.release()

    def release(self) -> None:
        self._touched = 0
        self.releases += 1
        if _madvise is None:
            return
        release_mapped_pages(self.addresses.file_path, self.addresses.ranges())
