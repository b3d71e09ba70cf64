"""A process's TCP sockets as Linux shows them: its socket inodes in /proc/PID/fd, their
rows in /proc/net/tcp and tcp6 (gRPC's and the JVM's are often IPv6)."""

from __future__ import annotations

import os
import time
from pathlib import Path

LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp
ESTABLISHED = "01"  # TCP_ESTABLISHED


def socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    return inodes


def tcp_rows(pid: int) -> list[tuple[str, str, str]]:
    """(local "ADDRESS:PORT", remote "ADDRESS:PORT", state), hex as the kernel writes
    them, of every TCP socket process ``pid`` owns."""
    inodes = socket_inodes(pid)
    rows = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            fields = row.split()
            if fields[9] in inodes:
                rows.append((fields[1], fields[2], fields[3]))
    return rows


def listening_addresses(pid: int) -> list[tuple[str, int]]:
    """(hex local address, port) of every listening TCP socket that process ``pid`` owns."""
    found = []
    for local, _remote, state in tcp_rows(pid):
        if state == LISTEN:
            address, port = local.split(":")
            found.append((address, int(port, 16)))
    return found


def wait_connected(pid: int, port: int, timeout_s: float = 60) -> None:
    """Until process ``pid`` has a TCP connection established to ``port``: a client that
    got that far has imported its modules and is talking to the server (a fixed sleep
    was not enough on a busy machine)."""
    deadline_s = time.monotonic() + timeout_s
    while time.monotonic() < deadline_s:
        for _local, remote, state in tcp_rows(pid):
            if state == ESTABLISHED and int(remote.split(":")[1], 16) == port:
                return
        time.sleep(0.05)
    raise AssertionError(f"process {pid} did not connect to port {port} in {timeout_s} s")
