"""This machine while a bench runs: free ports, how idle the CPUs are, a process's CPU time and memory."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import time


def free_port() -> int:
    """An unused TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rss_kib(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak) of a process, in KiB, from /proc/<pid>/status."""
    found: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(rest.split()[0])
    return found


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu_ticks() -> tuple[int, int]:
    """(idle, total) jiffies of the whole machine, from /proc/stat."""
    with open("/proc/stat") as stat:
        values = [int(v) for v in stat.readline().split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return idle, sum(values)


async def machine_idle(seconds: float = 1.0) -> float:
    """Fraction of the machine's CPU that was idle over the next `seconds`."""
    idle0, total0 = _cpu_ticks()
    await asyncio.sleep(seconds)
    idle1, total1 = _cpu_ticks()
    return (idle1 - idle0) / max(1, total1 - total0)


async def wait_quiet(
    label: str, *, idle_needed: float = 0.85, max_wait: float = 300.0
) -> float:
    """Wait (up to `max_wait` s) until the machine is mostly idle, so other work does not skew figures.

    Prints and returns the idle fraction seen last; figures taken on a busy machine say so.
    """
    deadline = time.monotonic() + max_wait
    while True:
        idle = await machine_idle(2.0)
        if idle >= idle_needed or time.monotonic() > deadline:
            note = (
                ""
                if idle >= idle_needed
                else "  (still busy: figures are skewed by other work)"
            )
            print(
                f"[{label}] machine idle {idle:.0%} before measuring{note}",
                file=sys.stderr,
                flush=True,
            )
            return idle
        await asyncio.sleep(3.0)
