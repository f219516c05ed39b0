"""A run's workspace as a zip, produced in a thread and streamed in chunks (never buffered whole).

Symbolic links are not followed and not included: a node cannot smuggle files from
outside its workspace into a download. Files that vanish while zipping are skipped.
"""

from __future__ import annotations

import asyncio
import os
import threading
import zipfile
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

CHUNK_BYTES = 256 * 1024
"""Bytes sent to the client per chunk."""
QUEUED_CHUNKS = 8
"""Chunks the zipping thread may run ahead of a slow client."""
_DONE = object()


class _Stopped(Exception):
    """The client went away; the zipping thread stops."""


def workspace_files(base: Path) -> Iterator[tuple[Path, str]]:
    """(absolute path, relative name) of every regular file, sorted, symlinks skipped."""
    if not base.is_dir() or base.is_symlink():
        return
    found: list[tuple[Path, str]] = []
    for root, dirs, files in os.walk(base, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not os.path.islink(os.path.join(root, d)))
        for name in files:
            path = Path(root, name)
            if not path.is_symlink() and path.is_file():
                found.append((path, path.relative_to(base).as_posix()))
    yield from sorted(found, key=lambda item: item[1])


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
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as archive:  # type: ignore[arg-type]
        for path, name in workspace_files(base):
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
            yield item  # type: ignore[misc]
    finally:
        stop.set()


INLINE_STAT_ENTRIES = 2000
"""Workspaces up to this many entries are measured on the event loop (a thread hop costs more)."""


def workspace_stats(base: Path, budget: int | None = None) -> tuple[int, int] | None:
    """(file count, total bytes) of exactly the files a download contains (symlinks skipped).

    With a `budget`, None once more entries than that were seen (measure it in a thread then).
    """
    count = size = seen = 0
    pending = [str(base)]
    while pending:
        try:
            entries = os.scandir(pending.pop())
        except (FileNotFoundError, NotADirectoryError):
            continue
        with entries:
            for entry in entries:
                seen += 1
                if budget is not None and seen > budget:
                    return None
                if entry.is_symlink():
                    continue
                if entry.is_dir():
                    pending.append(entry.path)
                elif entry.is_file():
                    count += 1
                    size += entry.stat().st_size
    return count, size


async def measure_workspace(base: Path) -> tuple[int, int]:
    """Workspace stats: inline when small, in a thread when large."""
    quick = workspace_stats(base, INLINE_STAT_ENTRIES)
    if quick is not None:
        return quick
    return await asyncio.to_thread(workspace_stats, base) or (0, 0)
