"""The host process of a bench (`python -m bench.host`): the flowtrail server plus a command channel.

The server is built exactly as `flowtrail serve` builds it (FLOWTRAIL_* variables, uvicorn,
uvloop, httptools); the command channel on stdin/stdout drives runs through RunService and
RunWriter in the server's own event loop (SQLite's live path is in-process). With
`--no-serve` it is a writer only, appending to PostgreSQL from another process (the server's
live tail delivers).

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
from bench.service import open_run_visit


class SaveRecorder:
    """Wall-clock time at which each event of a watched run was durably saved.

    It wraps the synchronous `EventStore.append_to_stream` that `AsyncEventStore` runs on a
    worker thread, so the time is taken the moment the store's save returned (the transaction
    committed), before the writer's coroutine resumes and publishes the events. It also wraps
    `AsyncEventStore.append_to_stream` for an append path that does not go through `EventStore`
    (then the time is taken when the awaited append returns).
    """

    def __init__(self, alog: Any) -> None:
        self.watched: dict[Any, dict[int, float]] = {}
        self._sync_append = alog.sync.append_to_stream
        self._async_append = alog.append_to_stream
        alog.sync.append_to_stream = self.sync_append
        alog.append_to_stream = self.async_append

    def _mark(self, events: Any, now: float) -> None:
        for event in events:
            times = self.watched.get(event.originator_id)
            if times is not None:
                times.setdefault(event.originator_version, now)

    def sync_append(self, events: Any) -> Any:
        result = self._sync_append(events)
        if self.watched:
            self._mark(events, time.time())
        return result

    async def async_append(self, events: Any) -> Any:
        result = await self._async_append(events)
        if self.watched:
            self._mark(events, time.time())
        return result

    def take(self, run_id: Any) -> dict[str, Any] | None:
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

    def __init__(self, services: Any) -> None:
        self.services = services
        self.recorder = SaveRecorder(services.store)
        self._baseline: Any = None

    def handlers(self) -> dict[str, Handler]:
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
        return {"pid": os.getpid()}

    async def new_run(
        self, emit: Any, record: bool = True, node_id: str = NODE_ID
    ) -> dict[str, Any]:
        run_id, writer, visit = await open_run_visit(self.services, node_id)
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
        writer = await self.services.runs.writer(run_id)
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
            await self.services.runs.release(run_id)
        return {
            "t0": t0,
            "t1": t1,
            "last_chunk": last_chunk,
            "last": writer.run.version,
            "saved": self.recorder.take(run_id),
        }

    async def _finish(self, writer: Any, visit: str) -> None:
        from domain import run as decide

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
        writer = await self.services.runs.writer(uuid.UUID(run))
        await self._finish(writer, visit)
        return {"last": writer.run.version}

    async def release(self, emit: Any, run: str) -> None:
        await self.services.runs.release(uuid.UUID(run))

    async def evict(
        self, emit: Any, run: str | None = None, timeout: float = 10.0
    ) -> dict[str, Any]:
        """Release the run's writer and evict every idle hot run, as the retention sweeper would."""
        hub = self.services.hub
        if run is not None:
            await self.services.runs.release(uuid.UUID(run))
        deadline = time.monotonic() + timeout
        evicted = 0
        while True:
            evicted += hub.evict_idle(now=time.monotonic() + 1e9)
            if (
                run is None
                or uuid.UUID(run) not in hub.runs
                or time.monotonic() > deadline
            ):
                break
            await asyncio.sleep(0.02)  # a client's stream may still be closing
        gone = run is None or uuid.UUID(run) not in hub.runs
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
        hub = self.services.hub
        info: dict[str, Any] = {
            "hot_runs": len(hub.runs),
            "frames": sum(len(h.frames) for h in hub.runs.values()),
        }
        if run is not None:
            h = hub.runs.get(uuid.UUID(run))
            info["run"] = (
                None
                if h is None
                else {
                    "version": h.version,
                    "frames": len(h.frames),
                    "watchers": h.watchers,
                    "writers": h.writers,
                }
            )
        return info

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
    import uvicorn

    from api.app import create_app
    from engine.bootstrap import build_services
    from engine.settings import Settings

    settings = Settings.from_env()
    services = build_services(settings)
    commands = HostCommands(services)
    server = task = None
    if serve:
        config = uvicorn.Config(
            create_app(services),
            host=settings.host,
            port=settings.port,
            log_level="warning",
            lifespan="on",
        )
        server = uvicorn.Server(config)
        task = asyncio.create_task(server.serve())
        while not server.started:
            if task.done():
                task.result()
                raise SystemExit("server stopped during start-up")
            await asyncio.sleep(0.01)
    else:
        await services.start()
    try:
        await serve_commands(
            commands.handlers(),
            {"port": settings.port, "store": services.store.location.kind},
        )
    finally:
        if server is not None and task is not None:
            server.should_exit = True
            await task
        else:
            await services.close()


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
