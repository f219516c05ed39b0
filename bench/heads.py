"""A `flowtrail serve` process's memory before and after oversized request heads (issue 22, decision 35).

Starts `flowtrail serve` on SQLite in a temporary directory, from this checkout or from `--checkout DIR`
(an older commit, e.g. `git worktree add /tmp/before <commit>`, to see what the limits changed), sends
`--heads` requests at once, each with one header value of `--mib` MiB, and prints what they were
answered and the server's resident memory before and after (VmRSS) and at its peak (VmHWM).

    python -m bench.heads [--heads 100] [--mib 4] [--checkout DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.cli import run_loop
from bench.machine import free_port, rss_kib
from tests.support.heads import oversized_heads
from tests.support.process import healthy

ROOT = Path(__file__).resolve().parents[1]


async def run(heads: int, mib: int, checkout: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        env = {**os.environ, "FLOWTRAIL_DATA_DIR": tmp, "FLOWTRAIL_PORT": str(port), "FLOWTRAIL_LOAD_DEMOS": "false"}
        process = subprocess.Popen([sys.executable, "-m", "scripts.cli", "serve"], cwd=checkout, env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            await healthy(f"http://127.0.0.1:{port}", process, lambda: "the server exited at start-up", seconds=15)
            before = rss_kib(process.pid)["VmRSS"] / 1024
            began = time.monotonic()
            got = await asyncio.to_thread(oversized_heads, port, heads, mib << 20)
            took = time.monotonic() - began
            await asyncio.sleep(1.0)
            memory = rss_kib(process.pid)
        finally:
            process.terminate()
            process.wait(15)
    answers = collections.Counter(one.answers[0].status if one.answers else "none" for one in got)
    print(f"{heads} heads of {mib} MiB at once ({heads * mib} MiB) from {checkout}: answered "
          f"{dict(answers)} in {took:.1f} s; server RSS {before:.1f} -> {memory['VmRSS'] / 1024:.1f} MiB "
          f"(peak {memory['VmHWM'] / 1024:.1f} MiB)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--heads", type=int, default=100)
    parser.add_argument("--mib", type=int, default=4)
    parser.add_argument("--checkout", type=Path, default=ROOT)
    run_loop(run(**vars(parser.parse_args())))


if __name__ == "__main__":
    main()
