"""The processes and stores of one bench, seen from its orchestrator; all stopped and dropped at the end.

Three kinds of process take part in a bench, all on loopback:

* the **orchestrator** (the bench module): makes a fresh store, starts the others, sends them
  commands, and computes and prints the figures; it does no work while a measurement runs;
* a **host** (`python -m bench.host`, see bench/host.py): the flowtrail server built exactly as
  `flowtrail serve` builds it, plus a command channel that drives runs in the server's own
  event loop; with `--no-serve` a writer only;
* a **client** (`python -m bench.client`, see bench/client.py): real SSE clients that record
  each frame's id, arrival time and the append time embedded in its content (bench/frames.py).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self

from bench.channel import Call, Worker
from bench.machine import free_port
from bench.names import API_KEY, stream_path
from bench.stores import Store


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


def follow(client: Worker, host: Worker, runs: Sequence[str], **options: Any) -> Call:
    """Have a client process read the streams of `runs` on `host`, one SSE client each (options: bench.client.follow)."""
    return client.send(
        "follow",
        base_url=host.info["base_url"],
        paths=[stream_path(run) for run in runs],
        **options,
    )


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
            "bench.host", *([] if serve else ["--no-serve"]), env=env, name=name
        )
        worker.info["base_url"] = f"http://127.0.0.1:{port}"
        self.workers.append(worker)
        return worker

    async def client(self, name: str = "client") -> Worker:
        """A process of SSE clients."""
        worker = await Worker.start("bench.client", name=name)
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
