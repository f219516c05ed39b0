"""Which local process holds a loopback TCP connection, read from /proc (Linux)."""

from __future__ import annotations

import os
from pathlib import Path


def socket_inodes(local_port: int) -> set[str]:
    """The inodes of the TCP sockets whose local port is `local_port`."""
    found: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table, encoding="ascii") as rows:
            next(rows)
            for row in rows:
                fields = row.split()
                if int(fields[1].rsplit(":", 1)[1], 16) == local_port:
                    found.add(fields[9])
    return found


def holder_of(local_port: int, pids: list[int]) -> int | None:
    """Which of `pids` holds the connection whose local end is `local_port` (None: none of them)."""
    inodes = {f"socket:[{inode}]" for inode in socket_inodes(local_port)}
    for pid in pids:
        fds = Path(f"/proc/{pid}/fd")
        for fd in fds.iterdir():
            try:
                if os.readlink(fd) in inodes:
                    return pid
            except OSError:
                continue
    return None
