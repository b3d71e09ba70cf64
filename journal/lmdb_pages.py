"""A structural check of LMDB's data file, run at open before LMDB writes to it.

LMDB keeps no checksums. Damage it meets in a *read* is mostly an error
(MDB_CORRUPTED, MDB_PAGE_NOTFOUND: ``CorruptJournalError``), but a page whose
header holds a wrong page number is met in a *write*: copy-on-write frees the
number the header names, not the page's own (silent damage to the free list),
and when that number equals the page just allocated, a C assertion in
``mdb_page_touch`` aborts the process, with no error to catch. So every page
reachable from the newest meta page is checked first: its header names its own
number, its flags are a branch, leaf or overflow page's, its node table lies
inside the page, every page number it holds is below the meta page's last
page, and no page is reached twice (a damaged child pointer to an ancestor would
loop the walk forever). This is a walk of the trees, not of the file: overflow pages (a value
longer than a page) have a header on their first page only.

The layout read here is LMDB 0.9's on a 64-bit little-endian host (``lmdb.h``,
``mdb.c``), the one py-lmdb bundles:

    page header (16)   pgno u64 | pad u16 | flags u16 | lower u16, upper u16
                                                        (overflow: pages u32)
    meta (page 0, 1)   header | magic u32 0xBEEFC0DE | version u32 | address u64 |
                       mapsize u64 | dbs[2] (free, main) | last_pgno u64 | txnid u64
    db record (48)     pad u32 | flags u16 | depth u16 | branch_pages u64 |
                       leaf_pages u64 | overflow_pages u64 | entries u64 | root u64
    node (8 + key)     lo u16 | hi u16 | flags u16 | ksize u16 | key | data
                       branch: child pgno = lo | hi << 16 | flags << 32
                       leaf: data size = lo | hi << 16; F_BIGDATA: data is an
                       overflow pgno; F_SUBDATA: data is a db record (named databases)

The journal opens its databases without DUPSORT, so no leaf holds sub-pages.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator

PAGE_HEADER_BYTES = 16
META_MAGIC = 0xBEEFC0DE
NODE_HEADER_BYTES = 8
DB_RECORD_BYTES = 48
P_INVALID = (1 << 64) - 1  # an empty tree's root

P_BRANCH = 0x01
P_LEAF = 0x02
P_OVERFLOW = 0x04
P_META = 0x08
P_LEAF2 = 0x20
# Flags LMDB keeps in memory only; on disk they are clear, but a page spilled and
# written back may carry them, so they are masked before the check.
IN_MEMORY_FLAGS = 0x10 | 0x4000 | 0x8000  # P_DIRTY, P_LOOSE, P_KEEP

F_BIGDATA = 0x01
F_SUBDATA = 0x02
F_DUPDATA = 0x04

_PAGE_HEADER = struct.Struct("<QHHHH")
_META = struct.Struct("<IIQQ")
_DB_RECORD = struct.Struct("<IHHQQQQQ")
_NODE = struct.Struct("<HHHH")
_LAST_PAGE_AND_TXNID = struct.Struct("<QQ")


class LmdbPageDamage(Exception):
    """What is wrong, and where (page number, byte position); the caller names the file."""


def check_pages(data_file: str, page_bytes: int) -> int:
    """Walk every tree of ``data_file`` from its newest meta page; the pages checked.

    Raises LmdbPageDamage at the first page that is not what its parent says it is.
    """
    with open(data_file, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        if size < 2 * page_bytes:
            raise LmdbPageDamage(f"the file is {size} bytes, shorter than its two meta pages")
        return _Walk(file.fileno(), size, page_bytes).run()


class _Walk:
    """Reads pages with pread, not through a mapping: the kernel maps pages around every
    fault of a mapping, and a walk that touches one page per overflow run would map most
    of a large file into the process (hundreds of MiB of resident memory)."""

    def __init__(self, fd: int, size: int, page_bytes: int) -> None:
        self.fd = fd
        self.size = size
        self.page_bytes = page_bytes
        self.last_page = 1
        self.checked = 0
        # A bit per page in use (set by run): every page of LMDB's trees has one parent, so
        # a page reached twice is a damaged page number, and one that is its own ancestor
        # would make the walk loop forever.
        self.walked = bytearray()

    def read(self, page_number: int, size_bytes: int | None = None) -> bytes:
        size_bytes = self.page_bytes if size_bytes is None else size_bytes
        data = os.pread(self.fd, size_bytes, page_number * self.page_bytes)
        if len(data) != size_bytes:
            raise LmdbPageDamage(f"page {page_number} lies past the file's end ({self.size} bytes)")
        return data

    def run(self) -> int:
        free_db, main_db, self.last_page = self._newest_meta()
        if (self.last_page + 1) * self.page_bytes > self.size:
            raise LmdbPageDamage(
                f"the meta page says pages 0..{self.last_page} are in use, but the file "
                f"holds {self.size // self.page_bytes} pages"
            )
        self.walked = bytearray(self.last_page // 8 + 1)
        # ``_tree`` is a generator: the free list (which LMDB rewrites at every commit) is
        # walked only when it is consumed.
        for _ in self._tree(free_db, "the free list"):
            pass
        for name, db_record in self._tree(main_db, "the main database"):
            self._tree_of(name, db_record)
        return self.checked

    def _newest_meta(self) -> tuple[int, int, int]:
        """(free root, main root, last page) of the meta page with the higher txnid."""
        found = []
        for page_number in (0, 1):
            page = self.read(page_number)
            pgno, _, flags, _, _ = _PAGE_HEADER.unpack_from(page, 0)
            magic, _, _, _ = _META.unpack_from(page, PAGE_HEADER_BYTES)
            if magic != META_MAGIC or not flags & P_META or pgno != page_number:
                continue
            dbs = PAGE_HEADER_BYTES + _META.size
            free_root = _DB_RECORD.unpack_from(page, dbs)[-1]
            main_root = _DB_RECORD.unpack_from(page, dbs + DB_RECORD_BYTES)[-1]
            last_page, txnid = _LAST_PAGE_AND_TXNID.unpack_from(page, dbs + 2 * DB_RECORD_BYTES)
            found.append((txnid, free_root, main_root, last_page))
        if not found:
            raise LmdbPageDamage("neither meta page (0 or 1) is valid")
        _, free_root, main_root, last_page = max(found)
        return free_root, main_root, last_page

    def _tree_of(self, name: bytes, db_record: bytes) -> None:
        if len(db_record) != DB_RECORD_BYTES:
            raise LmdbPageDamage(
                f"the main database's record of {name!r} is {len(db_record)} bytes, "
                f"not {DB_RECORD_BYTES}"
            )
        root = _DB_RECORD.unpack(db_record)[-1]
        for _ in self._tree(root, f"the database {name.decode(errors='replace')!r}"):
            pass

    def _tree(self, root: int, tree: str) -> Iterator[tuple[bytes, bytes]]:
        """Check the tree from ``root``; yield (key, db record) of its F_SUBDATA nodes."""
        if root == P_INVALID:
            return
        stack = [root]
        while stack:
            page_number = stack.pop()
            flags, page, nodes = self._page(page_number, tree)
            if flags & P_BRANCH:
                for _, lo, hi, node_flags, _ in nodes:
                    stack.append(self._in_use(lo | hi << 16 | node_flags << 32, tree, page_number))
                continue
            if flags & P_LEAF2:
                continue  # fixed-size keys only, no data (DUPFIXED sub-trees)
            for position, lo, hi, node_flags, key_bytes in nodes:
                data_start = position + NODE_HEADER_BYTES + key_bytes
                if node_flags & F_BIGDATA:
                    (overflow,) = struct.unpack_from("<Q", page, data_start)
                    self._overflow(self._in_use(overflow, tree, page_number), tree)
                elif node_flags & F_SUBDATA:
                    key = page[position + NODE_HEADER_BYTES : data_start]
                    yield key, page[data_start : data_start + (lo | hi << 16)]
                elif node_flags & F_DUPDATA:
                    raise LmdbPageDamage(
                        f"page {page_number} of {tree} has a duplicate-data node, which this "
                        "journal never writes"
                    )

    def _page(
        self, page_number: int, tree: str
    ) -> tuple[int, bytes, list[tuple[int, int, int, int, int]]]:
        """Check a branch or leaf page; its flags, bytes and nodes (position in the page,
        lo, hi, flags, ksize)."""
        base = page_number * self.page_bytes
        self._walk_once(page_number, tree)
        page = self.read(page_number)
        pgno, _, flags, lower, upper = _PAGE_HEADER.unpack_from(page, 0)
        self._check_header(page_number, pgno, tree)
        flags &= ~IN_MEMORY_FLAGS
        if flags not in (P_BRANCH, P_LEAF, P_LEAF | P_LEAF2):
            raise LmdbPageDamage(
                f"page {page_number} (byte {base}) of {tree} has flags 0x{flags:04x}, not a "
                "branch or leaf page's"
            )
        if not PAGE_HEADER_BYTES <= lower <= upper <= self.page_bytes or lower % 2:
            raise LmdbPageDamage(
                f"page {page_number} (byte {base}) of {tree} has lower {lower} and upper "
                f"{upper}, outside its {self.page_bytes} bytes"
            )
        self.checked += 1
        if flags & P_LEAF2:
            return flags, page, []
        count = (lower - PAGE_HEADER_BYTES) // 2
        nodes = []
        for offset in struct.unpack_from(f"<{count}H", page, PAGE_HEADER_BYTES):
            if not upper <= offset <= self.page_bytes - NODE_HEADER_BYTES:
                raise LmdbPageDamage(
                    f"page {page_number} (byte {base}) of {tree} has a node at {offset}, "
                    f"outside its node area {upper}..{self.page_bytes}"
                )
            lo, hi, node_flags, key_bytes = _NODE.unpack_from(page, offset)
            end = offset + NODE_HEADER_BYTES + key_bytes
            if flags & P_LEAF:
                end += 8 if node_flags & F_BIGDATA else lo | hi << 16
            if end > self.page_bytes:
                raise LmdbPageDamage(
                    f"page {page_number} (byte {base}) of {tree} has a node at {offset} that "
                    "runs past the page's end"
                )
            nodes.append((offset, lo, hi, node_flags, key_bytes))
        return flags, page, nodes

    def _overflow(self, page_number: int, tree: str) -> None:
        self._walk_once(page_number, tree)
        header = self.read(page_number, PAGE_HEADER_BYTES)
        pgno, _, flags, _, _ = _PAGE_HEADER.unpack_from(header, 0)
        self._check_header(page_number, pgno, tree)
        (pages,) = struct.unpack_from("<I", header, 12)
        if flags & ~IN_MEMORY_FLAGS != P_OVERFLOW or not 1 <= pages <= (
            self.last_page - page_number + 1
        ):
            raise LmdbPageDamage(
                f"page {page_number} (byte {page_number * self.page_bytes}) of {tree} should "
                f"start a run of overflow pages, but has flags 0x{flags:04x} and a count of "
                f"{pages} pages"
            )
        self.checked += 1

    def _walk_once(self, page_number: int, tree: str) -> None:
        """Mark the page walked; refuse one outside the pages in use (a root) or walked
        already (its number in a parent is damaged)."""
        if not 2 <= page_number <= self.last_page:
            raise LmdbPageDamage(
                f"{tree} starts at page {page_number}, outside the pages in use "
                f"(2..{self.last_page})"
            )
        byte, bit = divmod(page_number, 8)
        if self.walked[byte] >> bit & 1:
            raise LmdbPageDamage(
                f"page {page_number} of {tree} is reached a second time: a page number "
                "pointing to it is damaged (each page of a tree has one parent)"
            )
        self.walked[byte] |= 1 << bit

    def _check_header(self, page_number: int, pgno: int, tree: str) -> None:
        if pgno != page_number:
            raise LmdbPageDamage(
                f"page {page_number} (byte {page_number * self.page_bytes}) of {tree} says it "
                f"is page {pgno}: its header is damaged (LMDB would free the wrong page when "
                "it next writes there)"
            )

    def _in_use(self, page_number: int, tree: str, parent: int) -> int:
        if not 2 <= page_number <= self.last_page:
            raise LmdbPageDamage(
                f"page {parent} of {tree} points to page {page_number}, outside the pages in "
                f"use (2..{self.last_page})"
            )
        return page_number
