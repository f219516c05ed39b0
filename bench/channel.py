"""The command channel between an orchestrator and its worker processes: JSON lines on stdin/stdout.

The orchestrator starts a worker (`python -m bench.host`, `python -m bench.client`) as a
`Worker`, sends it commands (`{"id", "op", ...}`) and reads, per command, intermediate events,
then `done` with a result or `error` with a traceback. The worker side is `serve_commands`:
it says `ready`, runs each command as a task and answers on stdout until `quit` or EOF.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

from bench.names import ROOT

Handler = Callable[..., Awaitable[Any]]


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

    info: dict[str, Any]

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
        module: str,
        *args: str,
        env: dict[str, str] | None = None,
        name: str | None = None,
        timeout: float = 60.0,
    ) -> Worker:
        """Start `python -m MODULE ARGS` and wait until it says it is ready."""
        full_env = dict(os.environ)
        full_env.update(env or {})
        full_env["PYTHONPATH"] = str(ROOT) + os.pathsep + full_env.get("PYTHONPATH", "")
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            module,
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=full_env,
            cwd=str(ROOT),
            limit=1 << 26,
        )
        worker = cls(name or module, proc)
        try:
            ready = await asyncio.wait_for(asyncio.shield(worker.ready), timeout)
        except BaseException:
            await worker.kill()
            raise
        worker.info = ready
        return worker

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


class _Out:
    """JSON lines to the orchestrator on stdout (the protocol's only channel)."""

    def __init__(self) -> None:
        self.stream = sys.stdout.buffer

    def send(self, msg: dict[str, Any]) -> None:
        self.stream.write(json.dumps(msg, separators=(",", ":")).encode() + b"\n")
        self.stream.flush()


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
