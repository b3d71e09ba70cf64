"""What the metadata benchmark reads besides time: ZooKeeper's request counters (its
``mntr`` four-letter command) and a process's resident memory (``/proc``)."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

MNTR_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class ZooKeeperCounts:
    """ZooKeeper's counters since it started: requests received, and the write
    transactions among them; reads are the rest (pings included)."""

    packets_received: int
    writes: int
    znodes: int

    def minus(self, earlier: ZooKeeperCounts) -> dict[str, int]:
        requests = self.packets_received - earlier.packets_received
        writes = self.writes - earlier.writes
        return {
            "requests": requests,
            "writes": writes,
            "reads_and_pings": requests - writes,
            "znodes_added": self.znodes - earlier.znodes,
        }


def zookeeper_counts(host: str, port: int) -> ZooKeeperCounts:
    """``mntr``'s zk_packets_received and zk_znode_count, and the write transactions from
    ``srvr``'s Zxid (its low 32 bits count them within an epoch; a multi is one):
    a standalone server has no commit counter."""
    values: dict[str, str] = {}
    for line in _ask(host, port, b"mntr").splitlines():
        name, _, value = line.partition("\t")
        values[name.strip()] = value.strip()
    zxid = 0
    for line in _ask(host, port, b"srvr").splitlines():
        if line.startswith("Zxid:"):
            zxid = int(line.split(":", 1)[1].strip(), 16)
    return ZooKeeperCounts(
        int(values.get("zk_packets_received", 0)),
        zxid & 0xFFFFFFFF,
        int(values.get("zk_znode_count", 0)),
    )


def _ask(host: str, port: int, command: bytes) -> str:
    """A four-letter command's answer."""
    with socket.create_connection((host, port), timeout=MNTR_TIMEOUT_S) as connection:
        connection.sendall(command)
        chunks = []
        while chunk := connection.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def resident_bytes(pid: int) -> int:
    """VmRSS of process ``pid``."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def open_files(pid: int) -> int:
    """How many descriptors process ``pid`` holds open."""
    return len(list(Path(f"/proc/{pid}/fd").iterdir()))
