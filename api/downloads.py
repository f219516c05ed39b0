"""A run's workspace as a zip, produced in a thread and streamed in chunks (never buffered whole).

What is zipped is what `engine.workspace.listing` lists: regular files, no symbolic links.
Files that vanish while zipping are skipped.
"""

from __future__ import annotations

import asyncio
import threading
import zipfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from engine.workspace.listing import file_stats, regular_files

CHUNK_BYTES = 256 * 1024
"""Bytes sent to the client per chunk."""
QUEUED_CHUNKS = 8
"""Chunks the zipping thread may run ahead of a slow client."""
_DONE = object()


class _Stopped(Exception):
    """The client went away; the zipping thread stops."""


class _ChunkWriter:
    """A write-only, unseekable file that hands out fixed-size chunks (zipfile streams to it)."""

    def __init__(self, emit: Callable[[bytes], None]) -> None:
        self.emit = emit
        self.buffer = bytearray()

    def write(self, data: bytes) -> int:
        """Buffer data; emit every full chunk."""
        self.buffer += data
        while len(self.buffer) >= CHUNK_BYTES:
            self.emit(bytes(self.buffer[:CHUNK_BYTES]))
            del self.buffer[:CHUNK_BYTES]
        return len(data)

    def flush(self) -> None:
        """Nothing to do: chunks leave when they are full or at the end."""

    def finish(self) -> None:
        """Emit the last partial chunk."""
        if self.buffer:
            self.emit(bytes(self.buffer))
            self.buffer.clear()


def write_zip(base: Path, out: _ChunkWriter) -> None:
    """Write the zip of `base` to `out` (blocking; runs in the zipping thread)."""
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as archive:  # type: ignore[call-overload]  # a write-only stream; zipfile needs no seek
        for name, entry in sorted(regular_files(base), key=lambda found: found[0]):
            path = Path(entry.path)
            try:
                info = zipfile.ZipInfo.from_file(path, name, strict_timestamps=False)
                info.compress_type = zipfile.ZIP_DEFLATED
                with path.open("rb") as source, archive.open(info, "w", force_zip64=info.file_size > 2**31) as target:
                    while block := source.read(CHUNK_BYTES):
                        target.write(block)
            except FileNotFoundError:
                continue
    out.finish()


async def zip_chunks(base: Path) -> AsyncIterator[bytes]:
    """The zip of a directory, chunk by chunk, made by a thread that waits for slow clients."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[object] = asyncio.Queue()
    slots = threading.Semaphore(QUEUED_CHUNKS)
    stop = threading.Event()

    def emit(item: object) -> None:
        while not slots.acquire(timeout=0.5):
            if stop.is_set():
                raise _Stopped
        if stop.is_set():
            raise _Stopped
        loop.call_soon_threadsafe(queue.put_nowait, item)

    def produce() -> None:
        try:
            write_zip(base, _ChunkWriter(emit))
            emit(_DONE)
        except _Stopped:
            pass
        except BaseException as exc:  # noqa: BLE001 - handed to the response, which aborts
            if not stop.is_set():
                loop.call_soon_threadsafe(queue.put_nowait, exc)

    threading.Thread(target=produce, name="flowtrail-zip", daemon=True).start()
    try:
        while True:
            item = await queue.get()
            slots.release()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item  # type: ignore[misc]  # the queue holds chunks, the end marker and errors; only chunks get here
    finally:
        stop.set()


INLINE_STAT_ENTRIES = 2000
"""Workspaces up to this many files are measured on the event loop (a thread hop costs more)."""


async def measure_workspace(base: Path) -> tuple[int, int]:
    """Workspace stats: inline when small, in a thread when large."""
    quick = file_stats(base, INLINE_STAT_ENTRIES)
    if quick is not None:
        return quick
    return await asyncio.to_thread(file_stats, base) or (0, 0)
