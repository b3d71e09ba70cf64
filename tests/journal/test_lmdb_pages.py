"""The structural check of LMDB's data file at open (``journal/lmdb_pages.py``): a healthy
journal passes, and a page of its trees with a damaged header is refused before LMDB
writes over it (where it would free the wrong page, or abort the process)."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import lmdb
import pytest
from copier_support import transactional_batch

from twinlog.engine.base.errors import CorruptJournalError
from twinlog.journal import JournalLogs, LocalJournal
from twinlog.journal.lmdb_pages import P_BRANCH, P_LEAF, P_OVERFLOW, LmdbPageDamage, check_pages

P0 = "orders-0"
PAGE_HEADER = struct.Struct("<QHH")


def _write_journal(directory: Path) -> Path:
    """Small entries (many leaf pages and a branch) and 64 KiB ones (overflow pages: their
    batches kept in LMDB, as older journals and ``entry_batches="lmdb"`` keep them)."""
    journal = JournalLogs(LocalJournal.open(directory / "journal", entry_batches="lmdb"))
    journal.open_partition(P0, directory / "logs" / P0)
    for transaction_id in range(60):
        value_bytes = 64 * 1024 if transaction_id % 10 == 0 else 300
        journal.append(
            P0, transaction_id, transactional_batch(transaction_id, 0, value_bytes=value_bytes)
        )
    journal.close()
    return directory / "journal" / "data.mdb"


def _pages(data_file: Path) -> tuple[int, list[tuple[int, int]]]:
    """(page size, [(page number, flags)] of every page whose header names itself)."""
    environment = lmdb.open(str(data_file.parent), readonly=True, lock=False)
    try:
        page_bytes = environment.stat()["psize"]
        last_page = environment.info()["last_pgno"]
    finally:
        environment.close()
    data = data_file.read_bytes()
    found = []
    for number in range(2, last_page + 1):
        pgno, _, flags = PAGE_HEADER.unpack_from(data, number * page_bytes)
        if pgno == number and flags & (P_BRANCH | P_LEAF | P_OVERFLOW):
            found.append((number, flags))
    return page_bytes, found


def _set_pgno(data_file: Path, page_bytes: int, number: int, pgno: int) -> None:
    with open(data_file, "r+b") as file:
        file.seek(number * page_bytes)
        file.write(struct.pack("<Q", pgno))


def test_a_healthy_journal_passes_and_every_tree_page_is_walked(tmp_path: Path) -> None:
    data_file = _write_journal(tmp_path)
    page_bytes, pages = _pages(data_file)
    overflow = [number for number, flags in pages if flags & P_OVERFLOW]
    assert len(overflow) >= 6  # the 64 KiB entries
    assert check_pages(str(data_file), page_bytes) >= len(overflow) + 2
    JournalLogs(LocalJournal.open(tmp_path / "journal")).close()


@pytest.mark.parametrize("kind", [P_OVERFLOW, P_LEAF, P_BRANCH], ids=["overflow", "leaf", "branch"])
def test_a_page_whose_header_names_another_page_is_refused_at_open(
    tmp_path: Path, kind: int
) -> None:
    data_file = _write_journal(tmp_path)
    page_bytes, pages = _pages(data_file)
    candidates = [number for number, flags in pages if flags & kind]
    assert candidates, f"the journal has no page of kind {kind}"
    refused = 0
    for number in candidates:
        _set_pgno(data_file, page_bytes, number, number + 1)
        try:
            with pytest.raises(
                CorruptJournalError, match=f"page {number} .*says it is page {number + 1}"
            ):
                LocalJournal.open(tmp_path / "journal").close()
            refused += 1
        except pytest.fail.Exception:
            # Only a page LMDB freed (no tree reaches it) may pass: it is rewritten whole
            # before it is used again. Appends only: every overflow page is in a tree.
            assert kind != P_OVERFLOW, f"overflow page {number} was damaged and not refused"
        finally:
            _set_pgno(data_file, page_bytes, number, number)
    assert refused >= 1


def test_a_child_pointer_outside_the_pages_in_use_is_refused(tmp_path: Path) -> None:
    data_file = _write_journal(tmp_path)
    page_bytes, pages = _pages(data_file)
    branch = next(number for number, flags in pages if flags & P_BRANCH)
    data = bytearray(data_file.read_bytes())
    base = branch * page_bytes
    (first_node,) = struct.unpack_from("<H", data, base + 16)
    struct.pack_into("<HH", data, base + first_node, 0xFFFF, 0x7FFF)  # child pgno lo, hi
    data_file.write_bytes(bytes(data))
    with pytest.raises(LmdbPageDamage, match=f"page {branch} .* points to page"):
        check_pages(str(data_file), page_bytes)


def test_a_damaged_meta_pair_is_refused(tmp_path: Path) -> None:
    data_file = _write_journal(tmp_path)
    page_bytes, _ = _pages(data_file)
    data = bytearray(data_file.read_bytes())
    for meta in (0, 1):
        struct.pack_into("<I", data, meta * page_bytes + 16, 0)  # the magic
    data_file.write_bytes(bytes(data))
    with pytest.raises(LmdbPageDamage, match="neither meta page"):
        check_pages(str(data_file), page_bytes)


def test_a_child_pointer_back_into_its_own_tree_is_refused_not_walked_forever(
    tmp_path: Path,
) -> None:
    data_file = _write_journal(tmp_path)
    page_bytes, pages = _pages(data_file)
    branch = next(number for number, flags in pages if flags & P_BRANCH)
    data = bytearray(data_file.read_bytes())
    base = branch * page_bytes
    (first_node,) = struct.unpack_from("<H", data, base + 16)
    struct.pack_into("<HH", data, base + first_node, branch & 0xFFFF, branch >> 16)  # itself
    data_file.write_bytes(bytes(data))
    # In a child process: a walk that loops would never return (and grow without bound).
    walk = (
        "import sys\n"
        "from twinlog.journal.lmdb_pages import LmdbPageDamage, check_pages\n"
        "try:\n"
        f"    check_pages({str(data_file)!r}, {page_bytes})\n"
        "except LmdbPageDamage as damage:\n"
        "    sys.exit(str(damage))\n"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", walk], capture_output=True, text=True, timeout=30
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the page check walked a tree with a cycle forever")
    assert done.returncode == 1 and f"page {branch}" in done.stderr, done.stderr


def _free_list_root(data_file: Path, page_bytes: int) -> int:
    """The free list's root page in the newer meta page (dbs[0].root)."""
    data = data_file.read_bytes()
    newest = max(
        (0, 1), key=lambda meta: struct.unpack_from("<Q", data, meta * page_bytes + 16 + 128)[0]
    )
    (root,) = struct.unpack_from("<Q", data, newest * page_bytes + 16 + 24 + 40)
    return root


def test_a_damaged_header_in_the_free_list_is_refused_at_open(tmp_path: Path) -> None:
    data_file = _write_journal(tmp_path)
    page_bytes, _ = _pages(data_file)
    root = _free_list_root(data_file, page_bytes)
    assert root != (1 << 64) - 1, "the journal has an empty free list"
    # LMDB rewrites the free list at every commit: copy-on-write of this page would free
    # the page its header names.
    _set_pgno(data_file, page_bytes, root, root + 1)
    with pytest.raises(
        CorruptJournalError, match=f"page {root} .*of the free list says it is page {root + 1}"
    ):
        LocalJournal.open(tmp_path / "journal").close()
