"""The host process of a bench (`python -m bench.host`): the flowtrail server plus a command channel.

The server is built exactly as `flowtrail serve` builds it (FLOWTRAIL_* variables, uvicorn,
uvloop, httptools); the command channel on stdin/stdout drives runs through RunService and
RunWriter in the server's own event loop (SQLite's live path is in-process). With
`--no-serve` it is a writer only, appending to PostgreSQL from another process (the server's
live tail delivers); it tunes its collector as a server does at start-up, since in production
that other writer is another flowtrail server.

The host records, for each event of a watched run, the wall-clock time at which the writer's
save returned (`SaveRecorder`), so a frame's delay is `arrival - saved[id]` (bench/frames.py).
Step chunks carry `t` = `time.time()` when the chunk was handed to the writer (before the
coalescing window), so `arrival - t` is the delay a token sees end to end.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import time
import uuid
from collections.abc import Iterable
from typing import Any

from bench.channel import Handler, serve_commands
from bench.cli import run_loop
from bench.names import NODE_ID
from bench.service import Service
from domain import run as decide
from engine.runs.writer import RunWriter
from engine.settings import Settings


class SaveRecorder:
    """Wall-clock time at which each event of a watched run was durably saved.

    It wraps the synchronous `EventStore.append_to_stream` that `AsyncEventStore` runs on a
    worker thread, so the time is taken the moment the store's save returned (the transaction
    committed), before the writer's coroutine resumes and publishes the events. It also wraps
    `AsyncEventStore.append_to_stream` for an append path that does not go through `EventStore`
    (then the time is taken when the awaited append returns).
    """

    def __init__(self, store: Any) -> None:  # an AsyncEventStore, whose methods are replaced here
        self.watched: dict[Any, dict[int, float]] = {}
        self._sync_append = store.sync.append_to_stream
        self._async_append = store.append_to_stream
        store.sync.append_to_stream = self.sync_append
        store.append_to_stream = self.async_append

    def _mark(self, events: Any, now: float) -> None:
        for event in events:
            times = self.watched.get(event.originator_id)
            if times is not None:
                times.setdefault(event.originator_version, now)

    def sync_append(self, events: Any, *, retried: bool = False) -> Any:
        """The synchronous append, timed when it returns."""
        result = self._sync_append(events, retried=retried)
        if self.watched:
            self._mark(events, time.time())
        return result

    async def async_append(self, events: Any) -> Any:
        """The asynchronous append, timed when it returns (for events the synchronous one did not see)."""
        result = await self._async_append(events)
        if self.watched:
            self._mark(events, time.time())
        return result

    def take(self, run_id: Any) -> dict[str, Any] | None:
        """Stop watching the run; its save times from the first recorded version on (None when none)."""
        times = self.watched.pop(run_id, None)
        if not times:
            return None
        first, last = min(times), max(times)
        return {
            "first": first,
            "times": [round(times.get(v, 0.0), 6) for v in range(first, last + 1)],
        }


class HostCommands:
    """What a host does on command: create runs, stream chunks, finish, evict, report."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self.recorder = SaveRecorder(service.store)
        self._baseline: Any = None

    def handlers(self) -> dict[str, Handler]:
        """The commands by name, for the channel."""
        return {
            "new_run": self.new_run,
            "stream": self.stream,
            "finish": self.finish,
            "release": self.release,
            "evict": self.evict,
            "gc": self.gc,
            "hot": self.hot,
            "many_runs": self.many_runs,
            "objects": self.objects,
            "ping": self.ping,
        }

    async def ping(self, emit: Any) -> dict[str, Any]:
        """This process's pid."""
        return {"pid": os.getpid()}

    async def new_run(
        self, emit: Any, record: bool = True, node_id: str = NODE_ID
    ) -> dict[str, Any]:
        """A started run with one open visit; with `record`, its events' save times are recorded."""
        run_id, writer, visit = await self.service.open_run_visit(node_id)
        if record:
            self.recorder.watched[run_id] = {}
        return {"run": run_id.hex, "visit": visit, "version": writer.run.version}

    async def stream(
        self,
        emit: Any,
        run: str,
        visit: str,
        n: int,
        start: int = 0,
        kind: str = "step",
        yield_every: int = 1,
        finish: bool = False,
        release: bool = False,
        rate: float | None = None,
    ) -> dict[str, Any]:
        """Hand `n` chunks to the run's writer as fast as the loop allows (or `rate` a second), then flush."""
        run_id = uuid.UUID(run)
        writer = await self.service.writer(run_id)
        stream = writer.stream
        sleep = asyncio.sleep
        clock = time.time
        t0 = clock()
        for i in range(start, start + n):
            await stream(
                visit_uuid=visit,
                node_id=NODE_ID,
                kind=kind,
                content=f'{{"i":{i},"t":{clock():.6f}}}',
            )
            if rate:
                ahead = t0 + (i - start + 1) / rate - clock()
                if ahead > 0:
                    await sleep(ahead)
            elif yield_every and i % yield_every == 0:
                await sleep(0)
        await writer.flush()
        t1 = clock()
        last_chunk = writer.run.version
        if finish:
            await self._finish(writer, visit)
        if release:
            await self.service.release(run_id)
        return {
            "t0": t0,
            "t1": t1,
            "last_chunk": last_chunk,
            "last": writer.run.version,
            "saved": self.recorder.take(run_id),
        }

    async def _finish(self, writer: RunWriter, visit: str) -> None:
        await writer.decide(
            lambda run, at: decide.complete_visit(
                run,
                at,
                visit_uuid=visit,
                node_id=NODE_ID,
                output={"status": 200, "message": "ok", "data": {"x": 1}},
            ),
            lambda run, at: decide.record_visit(
                run, at, visit_uuid=visit, node_id=NODE_ID
            ),
            lambda run, at: decide.complete_run(
                run, at, output={"status": 200, "message": "done", "data": {}}
            ),
        )

    async def finish(self, emit: Any, run: str, visit: str) -> dict[str, Any]:
        """Complete the visit and the run."""
        writer = await self.service.writer(uuid.UUID(run))
        await self._finish(writer, visit)
        return {"last": writer.run.version}

    async def release(self, emit: Any, run: str) -> None:
        """Flush and let go of the run's writer."""
        await self.service.release(uuid.UUID(run))

    async def evict(
        self, emit: Any, run: str | None = None, timeout: float = 10.0
    ) -> dict[str, Any]:
        """Release the run's writer and evict every idle hot run, as the retention sweeper would."""
        run_id = None if run is None else uuid.UUID(run)
        if run_id is not None:
            await self.service.release(run_id)
        deadline = time.monotonic() + timeout
        evicted = 0
        while True:
            evicted += self.service.evict_idle()
            if (
                run_id is None
                or not self.service.is_hot(run_id)
                or time.monotonic() > deadline
            ):
                break
            await asyncio.sleep(0.02)  # a client's stream may still be closing
        gone = run_id is None or not self.service.is_hot(run_id)
        return {"evicted": evicted, "gone": gone}

    async def gc(self, emit: Any, trim: bool = False) -> dict[str, Any]:
        """Collect garbage; with `trim`, also hand free heap memory back to the OS (glibc malloc_trim)."""
        collected = gc.collect()
        trimmed = None
        if trim:
            import ctypes

            trimmed = ctypes.CDLL("libc.so.6").malloc_trim(0)
        return {"collected": collected, "trimmed": trimmed}

    async def objects(self, emit: Any, top: int = 15) -> dict[str, Any]:
        """How many live objects of each type the process holds (the biggest counts)."""
        from collections import Counter

        gc.collect()
        counts = Counter(type(o).__name__ for o in gc.get_objects())
        found: dict[str, Any] = {
            "total": sum(counts.values()),
            "top": counts.most_common(top),
            "allocated_blocks": sys.getallocatedblocks(),
        }
        import tracemalloc

        if tracemalloc.is_tracing():  # PYTHONTRACEMALLOC=1 in the host's environment
            found["traced_bytes"] = tracemalloc.get_traced_memory()[0]
            snapshot = tracemalloc.take_snapshot()
            if self._baseline is None:
                self._baseline = snapshot
            else:
                stats = snapshot.compare_to(self._baseline, "lineno")[:top]
                found["traced_growth"] = [str(stat) for stat in stats]
        return found

    async def hot(self, emit: Any, run: str | None = None) -> dict[str, Any]:
        """What the server holds in memory (and, with `run`, about that run)."""
        return self.service.hot_summary(None if run is None else uuid.UUID(run))

    async def many_runs(self, emit: Any, runs: int, events: int) -> dict[str, Any]:
        """`runs` finished runs of `events` step chunks each, one after another, nothing recorded."""
        t0 = time.time()
        ids = []
        for _ in range(runs):
            made = await self.new_run(emit, record=False)
            await self.stream(
                emit, made["run"], made["visit"], events, finish=True, release=True
            )
            ids.append(made["run"])
        return {"elapsed": time.time() - t0, "runs": ids}


async def host_main(serve: bool) -> None:
    """The flowtrail server from FLOWTRAIL_* (as `flowtrail serve`), with the command channel."""
    service = Service(Settings.from_env())
    commands = HostCommands(service)
    hosting = service.serving() if serve else service.running()
    async with hosting:
        await serve_commands(
            commands.handlers(),
            {"port": service.settings.port, "store": service.store.location.kind},
        )


def main(argv: Iterable[str] | None = None) -> None:
    """`python -m bench.host [--no-serve]`."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.host",
        description="a flowtrail server (from FLOWTRAIL_*) driven over stdin/stdout",
    )
    parser.add_argument(
        "--no-serve", action="store_true", help="no HTTP server: a writer process only"
    )
    args = parser.parse_args(list(argv) if argv is not None else None)
    run_loop(host_main(serve=not args.no_serve))


if __name__ == "__main__":
    main()
