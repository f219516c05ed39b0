"""Shared machinery of the benchmarks: processes, stores, clients, percentiles and tables.

Three kinds of process take part in a bench, all on loopback:

* the **orchestrator** (the bench module): makes a fresh store, starts the others, sends them
  commands, and computes and prints the figures; it does no work while a measurement runs;
* a **host** (`python -m bench.common host`): the flowtrail server built exactly as
  `flowtrail serve` builds it (FLOWTRAIL_* variables, uvicorn, uvloop, httptools), plus a
  command channel on stdin/stdout that drives runs through RunService and RunWriter in the
  server's own event loop (SQLite's live path is in-process). With `--no-serve` it is a
  writer only, appending to PostgreSQL from another process (the server's live tail delivers);
* a **client** (`python -m bench.common client`): real SSE clients (asyncio + httpx) that read
  the raw byte stream, split frames, and record each frame's id, arrival time and the append
  time embedded in its content.

Every host records, for each event of a watched run, the wall-clock time at which the
writer's save returned (it wraps the store's synchronous `EventStore.append`, which returns
once the transaction committed), so a frame's delay is `arrival - saved[id]`, both from
`time.time()` on this machine. Step chunks also carry `t` = `time.time()` when the chunk was handed to the
writer (before the coalescing window), so `arrival - t` is the delay a token sees end to end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import math
import os
import re
import shutil
import socket
import sys
import tempfile
import time
import traceback
import uuid
from array import array
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

ROOT = Path(__file__).resolve().parent.parent
PG_BASE = os.environ.get(
    "FLOWTRAIL_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test"
)
API_KEY = "bench-key"
WORKFLOW = "allowed-flow"
FLOW = {
    "workflow_id": 7,
    "workflow_name": WORKFLOW,
    "workflow_version": 1,
    "display_name": "Bench",
    "mode": "DAG",
}
NODE_ID = "research"


# --------------------------------------------------------------------------- figures


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100) of unsorted values; nan when empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(p / 100.0 * len(ordered) + 0.5) - 1))
    return ordered[k]


def median(values: Sequence[float]) -> float:
    """The middle value (nan when empty)."""
    return percentile(values, 50)


def ms(seconds: float) -> float:
    """Seconds to milliseconds."""
    return seconds * 1000.0


def fmt(value: Any) -> str:
    """A figure for a table: thousands separators, sensible decimals."""
    if isinstance(value, bool) or value is None:
        return "-" if value is None else str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        if abs(value) >= 100:
            return f"{value:.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}"
    return str(value)


def print_table(
    title: str, rows: list[dict[str, Any]], columns: Sequence[str] | None = None
) -> None:
    """Rows of dicts as an aligned text table under a title."""
    print()
    print(f"== {title}")
    if not rows:
        print("(no rows)")
        return
    columns = list(columns or rows[0].keys())
    cells = [[fmt(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    print(
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(columns, widths))
        )
    )
    print("  ".join("-" * w for w in widths))
    for r in cells:
        print(
            "  ".join(
                v.ljust(w) if i == 0 else v.rjust(w)
                for i, (v, w) in enumerate(zip(r, widths))
            )
        )
    sys.stdout.flush()


def verdict(value: float, target: float, *, at_least: bool) -> str:
    """'ok' or 'MISS' against a target."""
    if math.isnan(value):
        return "-"
    good = value >= target if at_least else value <= target
    return "ok" if good else "MISS"


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


def free_port() -> int:
    """An unused TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --------------------------------------------------------------------------- stores


class Store:
    """A fresh, empty event store: an SQLite file in a temp dir, or a new PostgreSQL schema."""

    def __init__(self, kind: str, workdir: Path) -> None:
        self.kind = kind
        self.workdir = workdir
        self.schema: str | None = None
        if kind == "sqlite":
            self.url = f"sqlite:///{workdir / 'flowtrail.db'}"
        elif kind == "postgres":
            self.schema = "bench_" + uuid.uuid4().hex[:12]
            self._pg_execute(f'CREATE SCHEMA "{self.schema}"')
            self.url = f"{PG_BASE}?schema={self.schema}"
        else:
            raise ValueError(f"unknown store kind {kind!r}")

    @staticmethod
    def _pg_execute(statement: str) -> None:
        import psycopg

        with psycopg.connect(PG_BASE, autocommit=True) as conn:
            conn.execute(statement)  # type: ignore[arg-type]

    def drop(self) -> None:
        """Drop the schema (PostgreSQL); the SQLite file goes with the temp dir."""
        if self.schema is not None:
            self._pg_execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')
            self.schema = None


def host_env(store: Store, data_dir: Path, port: int, **extra: Any) -> dict[str, str]:
    """FLOWTRAIL_* variables for a host process (extra: NAME=value without the prefix)."""
    env = {
        "FLOWTRAIL_DATABASE_URL": store.url,
        "FLOWTRAIL_PORT": str(port),
        "FLOWTRAIL_HOST": "127.0.0.1",
        "FLOWTRAIL_DATA_DIR": str(data_dir),
        "FLOWTRAIL_API_KEYS": json.dumps([{"key": API_KEY, "id": "bench"}]),
        "FLOWTRAIL_LOAD_DEMOS": "0",
    }
    for name, value in extra.items():
        env[f"FLOWTRAIL_{name.upper()}"] = str(value)
    return env


def stream_path(run: str) -> str:
    """The SSE path of a run."""
    return f"/api/v1/workflows/{WORKFLOW}/runs/{run}/stream"


# --------------------------------------------------------------------------- orchestrator side


class WorkerError(RuntimeError):
    """A worker process reported a failure or died."""


class Call:
    """One command sent to a worker: intermediate events, then `done` or `error`."""

    def __init__(self, worker: Worker, op: str) -> None:
        self.worker = worker
        self.op = op
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def _next(self, timeout: float) -> dict[str, Any]:
        try:
            msg = await asyncio.wait_for(self.queue.get(), timeout)
        except TimeoutError:
            raise WorkerError(
                f"{self.worker.name}: {self.op} timed out after {timeout:.0f} s"
            ) from None
        if msg.get("event") == "error":
            raise WorkerError(
                f"{self.worker.name}: {self.op} failed:\n{msg.get('error')}"
            )
        return msg

    async def wait(self, event: str, timeout: float = 60.0) -> dict[str, Any]:
        """Wait for an intermediate event."""
        while True:
            msg = await self._next(timeout)
            if msg.get("event") == event:
                return msg
            if msg.get("event") == "done":
                raise WorkerError(
                    f"{self.worker.name}: {self.op} finished before {event!r}"
                )

    async def result(self, timeout: float = 300.0) -> Any:
        """Wait for the command's result."""
        while True:
            msg = await self._next(timeout)
            if msg.get("event") == "done":
                return msg.get("result")


class Worker:
    """A bench process (host or client) driven over JSON lines on its stdin/stdout."""

    def __init__(self, name: str, proc: asyncio.subprocess.Process) -> None:
        self.name = name
        self.proc = proc
        self.pid = proc.pid
        self.ready: asyncio.Future[dict[str, Any]] = (
            asyncio.get_running_loop().create_future()
        )
        self._calls: dict[int, Call] = {}
        self._seq = 0
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def start(
        cls,
        role: str,
        *args: str,
        env: dict[str, str] | None = None,
        name: str | None = None,
        timeout: float = 60.0,
    ) -> Worker:
        """Start `python -m bench.common ROLE ARGS` and wait until it says it is ready."""
        full_env = dict(os.environ)
        full_env.update(env or {})
        full_env["PYTHONPATH"] = str(ROOT) + os.pathsep + full_env.get("PYTHONPATH", "")
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bench.common",
            role,
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=full_env,
            cwd=str(ROOT),
            limit=1 << 26,
        )
        worker = cls(name or role, proc)
        try:
            ready = await asyncio.wait_for(asyncio.shield(worker.ready), timeout)
        except BaseException:
            await worker.kill()
            raise
        worker.info = ready
        return worker

    info: dict[str, Any]

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while True:
            line = await self.proc.stdout.readline()
            if not line:
                break
            try:
                msg = json.loads(line)
            except ValueError:
                sys.stderr.write(f"[{self.name}] {line.decode(errors='replace')}")
                continue
            if msg.get("event") == "ready" and not self.ready.done():
                self.ready.set_result(msg)
                continue
            call = self._calls.get(msg.get("id", -1))
            if call is not None:
                call.queue.put_nowait(msg)
                if msg.get("event") in ("done", "error"):
                    self._calls.pop(msg["id"], None)
        died = {"event": "error", "error": f"{self.name} (pid {self.pid}) exited"}
        if not self.ready.done():
            self.ready.set_exception(WorkerError(died["error"]))
        for call in self._calls.values():
            call.queue.put_nowait(died)
        self._calls.clear()

    def send(self, op: str, **params: Any) -> Call:
        """Send a command; returns its Call."""
        assert self.proc.stdin is not None
        self._seq += 1
        call = Call(self, op)
        self._calls[self._seq] = call
        self.proc.stdin.write(
            json.dumps({"id": self._seq, "op": op, **params}).encode() + b"\n"
        )
        return call

    async def call(self, op: str, *, timeout: float = 300.0, **params: Any) -> Any:
        """Send a command and wait for its result."""
        return await self.send(op, **params).result(timeout)

    async def stop(self, timeout: float = 30.0) -> None:
        """Ask the process to quit; kill it (by pid) if it does not."""
        if self.proc.returncode is None and self.proc.stdin is not None:
            with contextlib.suppress(Exception):
                self.proc.stdin.write(b'{"op": "quit", "id": 0}\n')
                await self.proc.stdin.drain()
            try:
                await asyncio.wait_for(self.proc.wait(), timeout)
            except TimeoutError:
                await self.kill()
        with contextlib.suppress(Exception):
            await self._reader

    async def kill(self) -> None:
        """Terminate this process (only this one, by its pid)."""
        if self.proc.returncode is None:
            self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()


class Fleet:
    """The processes and stores of one bench; everything is stopped and dropped on exit."""

    def __init__(self, label: str = "bench") -> None:
        self.workdir = Path(tempfile.mkdtemp(prefix=f"flowtrail-{label}-"))
        self.workers: list[Worker] = []
        self.stores: list[Store] = []

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        for worker in reversed(self.workers):
            with contextlib.suppress(Exception):
                await worker.stop()
        for store in self.stores:
            with contextlib.suppress(Exception):
                store.drop()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def store(self, kind: str) -> Store:
        """A fresh store of this kind, dropped at the end."""
        store = Store(kind, self.workdir)
        self.stores.append(store)
        return store

    async def host(
        self,
        store: Store,
        *,
        serve: bool = True,
        port: int | None = None,
        name: str = "host",
        **settings: Any,
    ) -> Worker:
        """A flowtrail host (server + in-process writer) on a store; settings are FLOWTRAIL_* names."""
        port = port or free_port()
        env = host_env(store, self.workdir / "data", port, **settings)
        worker = await Worker.start(
            "host", *([] if serve else ["--no-serve"]), env=env, name=name
        )
        worker.info["base_url"] = f"http://127.0.0.1:{port}"
        self.workers.append(worker)
        return worker

    async def client(self, name: str = "client") -> Worker:
        """A process of SSE clients."""
        worker = await Worker.start("client", name=name)
        self.workers.append(worker)
        return worker

    async def retire(self, worker: Worker) -> None:
        """Stop one worker before the end."""
        await worker.stop()
        if worker in self.workers:
            self.workers.remove(worker)

    def frames_file(self) -> str:
        """A new path for a client's recorded frames."""
        return str(self.workdir / f"frames-{uuid.uuid4().hex[:8]}.bin")


@dataclass
class Frames:
    """What clients recorded: per frame the client index, id, arrival time and embedded append time."""

    client: array = field(default_factory=lambda: array("d"))
    id: array = field(default_factory=lambda: array("d"))
    arrival: array = field(default_factory=lambda: array("d"))
    t: array = field(default_factory=lambda: array("d"))

    @classmethod
    def load(cls, path: str) -> Frames:
        """Read a client's frame file (quadruples of doubles)."""
        raw = array("d")
        with open(path, "rb") as fh:
            raw.frombytes(fh.read())
        return cls(raw[0::4], raw[1::4], raw[2::4], raw[3::4])

    def __len__(self) -> int:
        return len(self.id)


def save_delays(
    frames: Frames, saved: dict[str, Any], *, steps_only: bool = True
) -> list[float]:
    """Per frame: arrival minus the time the writer's save of that event returned (seconds)."""
    first, times = saved["first"], saved["times"]
    out = []
    for fid, arrival, t in zip(frames.id, frames.arrival, frames.t):
        if steps_only and t == 0.0:
            continue
        k = int(fid) - first
        if 0 <= k < len(times):
            out.append(arrival - times[k])
    return out


def chunk_delays(frames: Frames) -> list[float]:
    """Per step frame: arrival minus the time its chunk was handed to the writer (seconds)."""
    return [arrival - t for arrival, t in zip(frames.arrival, frames.t) if t > 0.0]


# --------------------------------------------------------------------------- worker side


class _Out:
    """JSON lines to the orchestrator on stdout (the protocol's only channel)."""

    def __init__(self) -> None:
        self.stream = sys.stdout.buffer

    def send(self, msg: dict[str, Any]) -> None:
        self.stream.write(json.dumps(msg, separators=(",", ":")).encode() + b"\n")
        self.stream.flush()


Handler = Callable[..., Awaitable[Any]]


async def serve_commands(handlers: dict[str, Handler], ready: dict[str, Any]) -> None:
    """Read commands from stdin, run each as a task, answer on stdout, until `quit` or EOF."""
    out = _Out()
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 26)
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), sys.stdin
    )
    running: set[asyncio.Task[None]] = set()

    async def run(cmd: dict[str, Any]) -> None:
        cid = cmd.pop("id")
        op = cmd.pop("op")

        def emit(event: str, **fields: Any) -> None:
            out.send({"id": cid, "event": event, **fields})

        try:
            handler = handlers[op]
            result = await handler(emit=emit, **cmd)
            out.send({"id": cid, "event": "done", "result": result})
        except Exception:  # noqa: BLE001 - reported to the orchestrator
            out.send({"id": cid, "event": "error", "error": traceback.format_exc()})

    out.send({"event": "ready", "pid": os.getpid(), **ready})
    while True:
        line = await reader.readline()
        if not line:
            break
        cmd = json.loads(line)
        if cmd.get("op") == "quit":
            break
        task = asyncio.create_task(run(cmd))
        running.add(task)
        task.add_done_callback(running.discard)
    for task in list(running):
        task.cancel()
    await asyncio.gather(*running, return_exceptions=True)


class SaveRecorder:
    """Wall-clock time at which each event of a watched run was durably saved.

    It wraps the synchronous `EventStore.append` that `AsyncEventStore` runs on a worker thread, so the
    time is taken the moment the store's save returned (the transaction committed), before
    the writer's coroutine resumes and publishes the events. It also wraps `AsyncEventStore.append`
    for an append path that does not go through `EventStore` (then the time is taken when the
    awaited append returns).
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
    from api.sse import encode_frame
    from engine.bootstrap import build_services
    from engine.settings import Settings

    settings = Settings.from_env()
    services = build_services(settings, encode_frame=encode_frame)
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


_CLIENTS: dict[tuple[str, str], Any] = {}


def _http_client(base_url: str, key: str) -> Any:
    """One httpx client per server, kept across commands (its set-up is not part of a measurement).

    Keep-alive is off: every stream opens a new TCP connection, as a reconnecting client does.
    """
    import httpx

    client = _CLIENTS.get((base_url, key))
    if client is None:
        client = httpx.AsyncClient(
            base_url=base_url,
            headers={"X-API-Key": key},
            timeout=httpx.Timeout(120.0, connect=10.0),
            limits=httpx.Limits(max_connections=512, max_keepalive_connections=0),
        )
        _CLIENTS[(base_url, key)] = client
    return client


_STEP_RE = re.compile(
    rb'id: (\d+)\r\nevent: node_stream\r\ndata: [^\r]*\\"t\\":([0-9.]+)'
)


class _FrameReader:
    """Splits an SSE body into frames and records (client, id, arrival, t) per frame."""

    def __init__(self, idx: int, rec: array, stop_id: int | None) -> None:
        self.fidx = float(idx)
        self.rec = rec
        self.stop_id = stop_id
        self.buf = b""
        self.t_first: float | None = None
        self.t_last: float | None = None
        self.nbytes = self.frames = self.step_bytes = 0
        self.last_id = -1

    def feed(self, chunk: bytes, now: float) -> bool:
        """Take a piece of body that arrived at `now`; True once the frame `stop_id` arrived.

        Frames are found with C-level regex scans over each piece's complete frames, so a
        client process can keep up with the server (about 1 us a frame).
        """
        if self.t_first is None:
            self.t_first = now
        self.t_last = now
        self.nbytes += len(chunk)
        buf = self.buf + chunk if self.buf else chunk
        cut = buf.rfind(b"\r\n\r\n")
        if cut < 0:
            self.buf = buf
            return False
        complete, self.buf = buf[: cut + 4], buf[cut + 4 :]
        frames = (
            complete.count(b"\r\n\r\n")
            - complete.count(b"\r\n\r\n:")
            - complete.startswith(b":")
        )
        if frames <= 0:
            return False  # keep-alive comments only
        steps = _STEP_RE.findall(complete)
        if len(steps) == frames:
            self.step_bytes += len(complete)
        elif steps:
            self.step_bytes += sum(
                len(f) + 4 for f in complete.split(b"\r\n\r\n") if _STEP_RE.match(f)
            )
        rec, fidx = self.rec, self.fidx
        for fid, t in steps:
            rec.extend((fidx, float(fid), now, float(t)))
        self.frames += frames
        at = complete.rfind(b"\nid: ") + 1  # 0 when the only frame starts the piece
        self.last_id = int(complete[at + 4 : complete.index(b"\r", at + 4)])
        return self.stop_id is not None and self.last_id >= self.stop_id

    def summary(self, t_req: float, t_headers: float, ended: bool) -> dict[str, Any]:
        return {
            "t_req": t_req,
            "t_headers": t_headers,
            "t_first": self.t_first,
            "t_last": self.t_last,
            "frames": self.frames,
            "bytes": self.nbytes,
            "step_bytes": self.step_bytes,
            "last_id": self.last_id,
            "ended": ended,
        }


async def _read_httpx(
    client: Any,
    path: str,
    headers: dict[str, str],
    reader: _FrameReader,
    on_connected: Callable[[], None],
) -> dict[str, Any]:
    clock = time.time
    t_req = clock()
    ended = True
    async with client.stream("GET", path, headers=headers) as response:
        t_headers = clock()
        if response.status_code != 200:
            body = await response.aread()
            raise RuntimeError(f"{path}: HTTP {response.status_code}: {body[:300]!r}")
        on_connected()
        async for chunk in response.aiter_raw():
            if reader.feed(chunk, clock()):
                ended = False
                break
    return reader.summary(t_req, t_headers, ended)


async def _read_raw(
    base_url: str,
    path: str,
    headers: dict[str, str],
    reader: _FrameReader,
    on_connected: Callable[[], None],
) -> dict[str, Any]:
    """The same over a bare asyncio socket and a minimal HTTP/1.1 client (no client library cost)."""
    clock = time.time
    host, _, port = base_url.removeprefix("http://").partition(":")
    request = (
        f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n"
        + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        + "\r\n"
    )
    t_req = clock()
    stream_in, stream_out = await asyncio.open_connection(host, int(port))
    ended = True
    try:
        stream_out.write(request.encode())
        head = await stream_in.readuntil(b"\r\n\r\n")
        t_headers = clock()
        status = int(head.split(b" ", 2)[1])
        if status != 200:
            raise RuntimeError(
                f"{path}: HTTP {status}: {(head + await stream_in.read(300))!r}"
            )
        on_connected()
        chunked = b"transfer-encoding: chunked" in head.lower()
        while True:
            if not chunked:
                data = await stream_in.read(1 << 16)
                if not data:
                    break
                if reader.feed(data, clock()):
                    ended = False
                    break
                continue
            size = int((await stream_in.readline()).split(b";")[0], 16)
            if size == 0:
                break
            stop = False
            while size > 0:
                data = await stream_in.read(min(size, 1 << 16))
                if not data:
                    raise RuntimeError("connection closed inside a chunk")
                size -= len(data)
                stop = reader.feed(data, clock()) or stop
            await stream_in.readexactly(2)
            if stop:
                ended = False
                break
    finally:
        stream_out.close()
    return reader.summary(t_req, t_headers, ended)


async def client_follow(
    emit: Any,
    base_url: str,
    paths: list[str],
    last_event_id: int | None = None,
    stop_id: int | None = None,
    out: str | None = None,
    key: str = API_KEY,
    raw: bool = False,
) -> dict[str, Any]:
    """Read SSE streams (one client per path, concurrently) until each ends or reaches `stop_id`.

    Emits `connected` once every client has its response headers. Records per frame
    (client, id, arrival, t) into `out` when given. `raw` reads through a bare socket
    instead of httpx (to separate the server's latency from the client library's).
    """
    all_connected = asyncio.Event()
    connected = 0
    records: list[array] = [array("d") for _ in paths]
    headers = {"Accept": "text/event-stream", "X-API-Key": key}
    if last_event_id is not None:
        headers["Last-Event-ID"] = str(last_event_id)

    def on_connected() -> None:
        nonlocal connected
        connected += 1
        if connected == len(paths):
            all_connected.set()

    def one(idx: int, path: str) -> Awaitable[dict[str, Any]]:
        reader = _FrameReader(idx, records[idx], stop_id)
        if raw:
            return _read_raw(base_url, path, headers, reader, on_connected)
        return _read_httpx(
            _http_client(base_url, key), path, headers, reader, on_connected
        )

    tasks = [asyncio.create_task(one(i, p)) for i, p in enumerate(paths)]
    everything = asyncio.gather(*tasks)
    waiter = asyncio.create_task(all_connected.wait())
    await asyncio.wait([everything, waiter], return_when=asyncio.FIRST_COMPLETED)
    if everything.done() and everything.exception() is not None:
        waiter.cancel()
        raise everything.exception()  # type: ignore[misc]
    emit("connected")
    results = await everything
    waiter.cancel()
    if out:
        _write_records(out, records)
    return {"clients": results}


def _write_records(path: str, records: list[array]) -> None:
    with open(path, "wb") as fh:
        fh.writelines(rec.tobytes() for rec in records)


async def client_main() -> None:
    await serve_commands({"follow": client_follow}, {})


def _run(coro: Awaitable[Any]) -> None:
    """Run a coroutine on uvloop (what uvicorn picks for the server), else asyncio's loop."""
    try:
        import uvloop

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(coro)  # type: ignore[arg-type]
    except ImportError:
        asyncio.run(coro)  # type: ignore[arg-type]


def main(argv: Iterable[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.common", description="bench worker processes"
    )
    sub = parser.add_subparsers(dest="role", required=True)
    host = sub.add_parser(
        "host", help="a flowtrail server (from FLOWTRAIL_*) driven over stdin/stdout"
    )
    host.add_argument(
        "--no-serve", action="store_true", help="no HTTP server: a writer process only"
    )
    sub.add_parser("client", help="SSE clients driven over stdin/stdout")
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.role == "host":
        _run(host_main(serve=not args.no_serve))
    else:
        _run(client_main())


# --------------------------------------------------------------------------- bench entry points


def store_kinds(arg: str) -> list[str]:
    """`both`, `sqlite` or `postgres` to a list of kinds."""
    return ["sqlite", "postgres"] if arg == "both" else [arg]


def bench_main(
    run: Callable[..., Awaitable[Any]],
    add_args: Callable[[argparse.ArgumentParser], None],
    description: str,
) -> None:
    """Common CLI of the bench modules: --store and module-specific sizes."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--store", choices=["both", "sqlite", "postgres"], default="both"
    )
    add_args(parser)
    args = vars(parser.parse_args())
    kinds = store_kinds(args.pop("store"))

    async def go() -> None:
        await wait_quiet(parser.prog)
        await run(kinds=kinds, **args)

    _run(go())


async def open_run_visit(services: Any, node_id: str = NODE_ID) -> tuple[Any, Any, str]:
    """A started run with one open agent visit: (run id, its writer, the visit uuid)."""
    from domain import run as decide

    created = await services.runs.create(caller_key_id="bench", **FLOW)
    run_id = created.originator_id
    writer = await services.runs.writer(run_id)
    await writer.decide(decide.start_run)
    visit = uuid.uuid4().hex
    await writer.decide(
        lambda run, at: decide.start_visit(
            run, at, visit_uuid=visit, node_id=node_id, node_type="agent", node_label="Research",
            iter_seq=1, sort_order=1,
        )
    )
    return run_id, writer, visit


if __name__ == "__main__":
    main()

