"""A user's mistake at the `flowtrail` command is one line on stderr, never a traceback: no service at the URL, an
output path that cannot be written, a closed standard output."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flowtrail_client import FlowtrailClient
from tests.support.process import ROOT
from tests.support.server import free_port

RUN = "0123456789abcdef0123456789abcdef"


async def flowtrail(*args: str, shell: str = "") -> subprocess.CompletedProcess[str]:
    """`flowtrail ARGS` from the working tree with no FLOWTRAIL_* variable (`shell`: a pipe after it)."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("FLOWTRAIL_")}
    env["PYTHONPATH"] = str(ROOT)
    command = [sys.executable, "-m", "scripts.cli", *args]
    if shell:
        command = ["bash", "-o", "pipefail", "-c", f"{subprocess.list2cmdline(command)} {shell}"]
    return await asyncio.to_thread(subprocess.run, command, cwd=ROOT, env=env, capture_output=True, text=True,
                                   timeout=60)


def no_service() -> str:
    """The URL of a loopback port where nothing listens."""
    return f"http://127.0.0.1:{free_port()}"


async def test_flowtrail_demo_with_no_service_says_so_naming_the_url():
    url = no_service()
    done = await flowtrail("demo", "--url", url)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"error: cannot reach the service at {url}: All connection attempts failed (waited 5 s; is `flowtrail serve` "
        "running there? --url or FLOWTRAIL_URL names another)"]


@pytest.mark.parametrize("command", [
    ("runs", "list"), ("runs", "show", RUN), ("runs", "watch", RUN), ("runs", "cancel", RUN), ("export", RUN),
    ("audit", RUN), ("runs", "create", "demo-report", "--var", "topic=x"),
])
async def test_every_command_that_talks_to_the_service_says_in_one_line_that_it_is_not_there(command):
    url = no_service()
    done = await flowtrail(*command, "--url", url, "--key", "k")
    assert done.returncode == 1
    assert done.stderr.splitlines() == [f"error: cannot reach the service at {url}: All connection attempts failed"]


async def finished_run(server) -> str:
    async with FlowtrailClient(server.base_url, "test-key-all") as client:
        run = await client.create("demo-agentic", {"topic": "tides"})
        await client.start(run)
        async for _ in client.stream(run):
            pass
    return run.run_id


@pytest.mark.store
async def test_export_to_a_path_that_cannot_be_written_is_one_line_naming_it(demo_server, tmp_path):
    run_id = await finished_run(demo_server)
    connection = ("--url", demo_server.base_url, "--key", "test-key-all")
    missing = await flowtrail("export", run_id, "-o", str(tmp_path / "no-such-dir" / "x.jsonl"), *connection)
    directory = await flowtrail("export", run_id, "-o", str(tmp_path), *connection)
    assert missing.returncode == 1
    assert missing.stderr.splitlines() == [f"error: {tmp_path / 'no-such-dir' / 'x.jsonl'}: No such file or directory"]
    assert directory.returncode == 1 and directory.stderr.splitlines() == [f"error: {tmp_path}: Is a directory"]


@pytest.mark.store
async def test_export_into_a_pipe_closed_early_ends_without_a_word(demo_server):
    run_id = await finished_run(demo_server)
    done = await flowtrail("export", run_id, "--url", demo_server.base_url, "--key", "test-key-all", shell="| head -c 10")
    assert done.stdout.startswith('{"') and len(done.stdout) == 10
    assert done.stderr == ""


async def test_a_file_that_cannot_be_read_is_one_line(tmp_path: Path):
    done = await flowtrail("verify", str(tmp_path / "none.jsonl"))
    assert done.returncode == 1
    assert done.stderr.splitlines() == [f"error: cannot read {tmp_path / 'none.jsonl'}: No such file or directory"]
