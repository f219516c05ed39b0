"""`./run` as a newcomer meets it: the demo's stream alone on the terminal (the server's lines in a log file it names),
the viewer's and the API docs' URLs at the end, a graceful stop on Ctrl-C, and a taken port refused in one line."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
from pathlib import Path

from tests.support.process import ROOT
from tests.support.server import free_port

LOG_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ [A-Z]+ ")


def run_env(port: int, data_dir: Path) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith("FLOWTRAIL_")}
    return {**env, "FLOWTRAIL_PORT": str(port), "FLOWTRAIL_DATA_DIR": str(data_dir),
            "FLOWTRAIL_SCRIPTED_PACE_SECONDS": "0.01"}


async def lines_until(stream: asyncio.StreamReader, last: str) -> list[str]:
    """Lines read until (and with) the one that starts with `last`; all of them if the stream ends first."""
    lines: list[str] = []
    while not lines or not lines[-1].startswith(last):
        raw = await asyncio.wait_for(stream.readline(), timeout=120)
        if not raw:
            break
        lines.append(raw.decode().rstrip("\n"))
    return lines


async def test_run_prints_the_demo_alone_ends_with_the_urls_and_stops_gracefully_on_ctrl_c(tmp_path):
    port, data_dir = free_port(), tmp_path / "data"
    process = await asyncio.create_subprocess_exec(
        str(ROOT / "run"), env=run_env(port, data_dir), stdout=asyncio.subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    assert process.stdout is not None
    try:
        lines = await lines_until(process.stdout, "Ctrl-C to stop.")
    finally:
        process.send_signal(signal.SIGINT)
        status = await asyncio.wait_for(process.wait(), timeout=60)
    base, log = f"http://127.0.0.1:{port}", data_dir / "server.log"
    assert lines[0] == f"flowtrail started (its log: {log}); a demo run:"
    assert [line for line in lines if LOG_RECORD.match(line)] == []
    assert any(line.endswith("[report] SUCCESS") for line in lines)
    thinking = [line.split(" thinking: ")[1] for line in lines if " thinking: " in line]
    assert len(thinking) >= 6 and all(text.endswith((".", "?")) and " " in text for text in thinking), thinking
    assert [line for line in lines if " finished " in line][0].split(" finished ")[1].startswith("SUCCESS")
    assert lines[-5:] == [
        f"flowtrail is serving on {base}", f"  run viewer: {base}/ui/",
        f"  API docs:   {base}/schema/swagger (also /schema/redoc)", f"  server log: {log}", "Ctrl-C to stop.",
    ]
    written = log.read_text(encoding="utf-8")
    assert status == 130
    assert f"listening on {base}" in written and "Application shutdown complete." in written
    assert "Traceback" not in written


async def test_run_refuses_a_taken_port_in_one_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = await asyncio.to_thread(subprocess.run, [str(ROOT / "run")], env=run_env(port, tmp_path / "data"),
                                       capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"flowtrail could not start: FLOWTRAIL_PORT: cannot listen on 127.0.0.1:{port}: Address already in use; "
        "accepted: a free port on an address of this machine"]
