"""The real Hermes Agent gateway (hermes-agent 0.19.0) for tests: installed once into `.venv-hermes`, run as a process.

Its pins clash with ours, so it lives in its own virtual environment at the repository root
(git-ignored, reused while it imports). The suite skips the gateway tests only when it cannot
be installed, and says why; with `CI` set that is a failure instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from tests.fakes.hermes import FakeGatewayModel

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv-hermes"
PACKAGES = ("hermes-agent==0.19.0", "aiohttp")
KEY_ENV = "FLOWTRAIL_TEST_HERMES_KEY"
"""The variable our test configuration names as the gateway's api_key_env."""
GATEWAY_KEY = "hermes-test-key-7f3a9c2e5b1d"
"""The gateway's API_SERVER_KEY in tests (at least 16 characters, or the gateway refuses to start)."""
STOP_SECONDS = 3.0
"""How long the gateway gets to exit after SIGTERM at the end of the suite before it is killed (it can take 15 s)."""


def _python() -> Path:
    return VENV / "bin" / "python"


def _installed() -> bool:
    if not _python().exists():
        return False
    return subprocess.run([str(_python()), "-c", "import gateway.run, aiohttp"], capture_output=True).returncode == 0


def _install() -> str | None:
    """Install the gateway into VENV unless it is there; the reason when it cannot be."""
    with open(ROOT / ".venv-hermes.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _installed():
            return None
        steps = ([sys.executable, "-m", "venv", str(VENV)],
                 [str(_python()), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *PACKAGES])
        for step in steps:
            done = subprocess.run(step, capture_output=True, text=True)
            if done.returncode != 0:
                return f"{' '.join(step[-3:])} failed: {(done.stderr or done.stdout).strip()[-400:]}"
        return None if _installed() else "the installed gateway does not import"


def gateway_python() -> Path:
    """The gateway's interpreter, installing it first; skips (or fails under CI) when that is impossible."""
    problem = _install()
    if problem is not None:
        message = f"the Hermes gateway (hermes-agent==0.19.0) cannot be installed: {problem}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return _python()


def free_port() -> int:
    """A loopback port the OS says is free."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class Gateway:
    """A running gateway: where it listens, its key, and its home directory."""

    base_url: str
    key: str
    home: Path


def _config(model_url: str) -> str:
    return (f"model:\n  provider: custom\n  base_url: {model_url}\n  default: fake-model\n"
            "  context_length: 65536\n")


@contextlib.asynccontextmanager
async def running_gateway(home: Path, model_url: str) -> AsyncIterator[Gateway]:
    """`python -m gateway.run` on a free loopback port, its model at `model_url`; stopped afterwards."""
    python = gateway_python()
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(_config(model_url), encoding="utf-8")
    port = free_port()
    env = {key: value for key, value in os.environ.items() if not key.startswith(("FLOWTRAIL_", "OPENAI_"))}
    env.update(HERMES_HOME=str(home), API_SERVER_ENABLED="true", API_SERVER_KEY=GATEWAY_KEY,
               API_SERVER_HOST="127.0.0.1", API_SERVER_PORT=str(port), TIRITH_ENABLED="false")
    log = open(home / "gateway.log", "wb")
    process = subprocess.Popen([str(python), "-m", "gateway.run"], cwd=home, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        base_url = f"http://127.0.0.1:{port}"
        await _wait_healthy(base_url, process, home)
        yield Gateway(base_url, GATEWAY_KEY, home)
    finally:
        process.terminate()
        try:
            await asyncio.to_thread(process.wait, STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            await asyncio.to_thread(process.wait)
        log.close()


async def _wait_healthy(base_url: str, process: subprocess.Popen[bytes], home: Path, timeout: float = 120.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    async with httpx.AsyncClient(timeout=1.0) as client:
        while loop.time() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"the gateway exited ({process.returncode}): {(home / 'gateway.log').read_text()[-2000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get(f"{base_url}/health")).status_code == 200:
                    return
            await asyncio.sleep(0.25)
    raise RuntimeError(f"the gateway never became healthy: {(home / 'gateway.log').read_text()[-2000:]}")


async def warm_up(gateway: Gateway) -> None:
    """One throwaway run: the gateway's first run loads much of the agent, which later runs then find ready."""
    headers = {"Authorization": f"Bearer {gateway.key}"}
    async with httpx.AsyncClient(base_url=gateway.base_url, headers=headers, timeout=180.0) as client:
        run_id = (await client.post("/v1/runs", json={"input": "warm up"})).json()["run_id"]
        async with client.stream("GET", f"/v1/runs/{run_id}/events") as events:
            async for _ in events.aiter_lines():
                pass


@pytest_asyncio.fixture(scope="session")
async def gateway_model() -> AsyncIterator[FakeGatewayModel]:
    """The fake model the gateway talks to, shared by the suite."""
    server = FakeGatewayModel()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest_asyncio.fixture(scope="session")
async def hermes_gateway(gateway_model: FakeGatewayModel, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gateway]:
    """One real gateway for the suite, its HERMES_HOME a temporary directory."""
    async with running_gateway(tmp_path_factory.mktemp("hermes-home"), gateway_model.base_url) as started:
        await warm_up(started)
        gateway_model.reset()
        yield started


@pytest_asyncio.fixture
async def hermes_model(gateway_model: FakeGatewayModel) -> AsyncIterator[FakeGatewayModel]:
    """The gateway's model with no programmed replies and no recorded requests; hanging replies end after the test."""
    gateway_model.reset()
    yield gateway_model
    gateway_model.release_hangs()


@pytest.fixture
def keyed_gateway(hermes_gateway: Gateway, monkeypatch: pytest.MonkeyPatch) -> Gateway:
    """The gateway, its key in KEY_ENV."""
    monkeypatch.setenv(KEY_ENV, hermes_gateway.key)
    return hermes_gateway
