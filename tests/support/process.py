"""A flowtrail server in its own process, started the way an operator would."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import httpx

from tests.support.server import KEYS, free_port

ROOT = Path(__file__).resolve().parents[2]
SERVE = (sys.executable, "-m", "scripts.cli", "serve")
"""`flowtrail serve` from the working tree."""


class ServerProcess:
    """`flowtrail serve` in a subprocess on a loopback port; its stderr (the log) goes to `log_path`."""

    def __init__(self, database_url: str, data_dir: Path, *, command: Sequence[str] = SERVE, cwd: str | Path = ROOT,
                 **env: str) -> None:
        self.command, self.cwd = list(command), cwd
        self.port = free_port()
        self.log_path = data_dir.parent / f"{data_dir.name}-server-{self.port}.log"
        keys = [{"key": k.key, "id": k.id, "workflowNames": list(k.workflow_names)} for k in KEYS]
        self.env = {
            **os.environ,
            "FLOWTRAIL_DATABASE_URL": database_url,
            "FLOWTRAIL_DATA_DIR": str(data_dir),
            "FLOWTRAIL_PORT": str(self.port),
            "FLOWTRAIL_API_KEYS": json.dumps(keys),
            "FLOWTRAIL_LOAD_DEMOS": "false",
            "FLOWTRAIL_KEEPALIVE_SECONDS": "1",
            **env,
        }
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        """http://127.0.0.1:PORT"""
        return f"http://127.0.0.1:{self.port}"

    def launch(self) -> subprocess.Popen[bytes]:
        """Start the process and return at once."""
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(self.command, cwd=self.cwd, env=self.env, stdout=subprocess.DEVNULL, stderr=log)
        return self.process

    async def start(self) -> ServerProcess:
        """Start and wait until /healthz answers."""
        await healthy(self.base_url, self.launch(), lambda: f"server exited: {self.log()[-2000:]}", seconds=15)
        return self

    def log(self) -> str:
        """Everything the server wrote to stderr so far (every start of this server, in order)."""
        return self.log_path.read_text(encoding="utf-8", errors="replace") if self.log_path.exists() else ""

    def client(self, key: str = "test-key-all") -> httpx.AsyncClient:
        """An HTTP client for this server."""
        return httpx.AsyncClient(base_url=self.base_url, headers={"X-API-Key": key}, timeout=30.0)

    async def stop(self) -> None:
        """Terminate and wait."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            await asyncio.to_thread(self.process.wait, 15)


async def healthy(base_url: str, process: subprocess.Popen[bytes], exited: Callable[[], str], *, seconds: float,
                  every: float = 0.05, late: Callable[[], str] = lambda: "") -> None:
    """Wait until `base_url`/healthz answers 200, asking every `every` s; RuntimeError(`exited()`) when the process
    ends first, and one naming `late()` when `seconds` pass."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    async with httpx.AsyncClient() as client:
        while loop.time() < deadline:
            if process.poll() is not None:
                raise RuntimeError(exited())
            try:
                if (await client.get(f"{base_url}/healthz", timeout=2.0)).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(every)
    raise RuntimeError(f"{base_url} did not answer /healthz within {seconds:g} s{late()}")
