"""`flowtrail export RUN_ID`: a run's stored events as JSON Lines, read from the service (no store is opened)."""

from __future__ import annotations

import sys
from contextlib import aclosing
from typing import BinaryIO

from flowtrail_client import FlowtrailClient
from scripts.connect import command_key, connect, reported


class LazyOutput:
    """Standard output (`-`), or a file opened at the first write: a run without events creates nothing."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.handle: BinaryIO | None = None

    def write(self, data: bytes) -> None:
        """Write, opening the file first if need be."""
        if self.handle is None:
            self.handle = sys.stdout.buffer if self.path == "-" else open(self.path, "wb")
        self.handle.write(data)

    def close(self) -> None:
        """Flush standard output, or close the file."""
        if self.handle is not None:
            self.handle.flush() if self.path == "-" else self.handle.close()


async def export(client: FlowtrailClient, run_id: str, output: str) -> int:
    """Write every stored event of the run, one JSON object a line, in order."""
    out = LazyOutput(output)
    try:
        async with aclosing(client.events(run_id)) as lines:
            async for line in lines:
                out.write(line.raw + b"\n")
    finally:
        out.close()
    if out.handle is None:
        print(f"error: run {run_id} has no events", file=sys.stderr)
        return 1
    return 0


def export_run(run_id: str, output: str, *, url: str | None = None, key: str | None = None) -> int:
    """`flowtrail export`: 0 when the run's events were written, 1 when it is not found or the service fails."""
    async def work() -> int:
        async with connect(url, command_key(key)) as client:
            return await export(client, run_id, output)

    return reported(work)
