"""Every benchmark with modest sizes, one after another, then all tables again together.

    python -m bench.run_all [--store both|sqlite|postgres] [--quick] [--json results.json]

`--quick` shrinks every size (a smoke run of the benches themselves, figures not comparable).
The whole default set takes about three minutes on the 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import time
from typing import Any

from bench import append, fanout, memory, reconnect, sse_delivery
from bench.cli import run_loop, store_kinds
from bench.figures import print_table
from bench.machine import wait_quiet
from bench.names import ROOT


def environment() -> dict[str, Any]:
    """What the figures were measured on."""

    def git(*args: str) -> str:
        try:
            return subprocess.run(
                ["git", *args],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return "?"

    pg = "?"
    try:
        import psycopg

        from bench.stores import PG_BASE

        with psycopg.connect(PG_BASE, connect_timeout=3) as conn:
            row = conn.execute("SHOW server_version").fetchone()
            pg = row[0] if row else "?"
    except Exception as exc:  # noqa: BLE001 - informational only
        pg = f"? ({type(exc).__name__})"
    return {
        "commit": git("rev-parse", "--short", "HEAD") or "?",
        "dirty": bool(git("status", "--porcelain", "--", ".")),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "postgres": pg,
        "psycopg_impl": _psycopg_impl(),
    }


def _psycopg_impl() -> str:
    try:
        import psycopg

        return str(psycopg.pq.__impl__)
    except Exception:  # noqa: BLE001
        return "?"


async def run_all(kinds: list[str], quick: bool) -> dict[str, Any]:
    """Every bench in turn, then all their tables again together."""
    results: dict[str, Any] = {"environment": environment()}
    print("environment:", json.dumps(results["environment"]))
    timings = {}
    steps = [
        (
            "sse_delivery",
            lambda: sse_delivery.run(
                kinds, events=2000 if quick else 10_000, repeat=1 if quick else 3
            ),
        ),
        (
            "reconnect",
            lambda: reconnect.run(
                kinds,
                missed=1000 if quick else 5000,
                repeat=3 if quick else 15,
                restarts=1 if quick else 3,
            ),
        ),
        (
            "fanout",
            lambda: fanout.run(
                kinds,
                clients=10 if quick else 50,
                events=1000 if quick else 5000,
                paced_events=500 if quick else 3000,
            ),
        ),
        (
            "memory",
            lambda: memory.run(
                kinds,
                runs=10 if quick else 100,
                events=200 if quick else 1000,
                rounds=1 if quick else 2,
            ),
        ),
        (
            "append",
            lambda: append.run(
                kinds, chunks=2000 if quick else 20_000, rounds=1 if quick else 3
            ),
        ),
    ]
    idle = {}
    for name, step in steps:
        idle[name] = await wait_quiet(name)
        t0 = time.time()
        results[name] = await step()
        timings[name] = time.time() - t0
    results["seconds"] = timings
    results["idle_before"] = idle
    print()
    print("=" * 100)
    print("ALL RESULTS", json.dumps(results["environment"]))
    print_table("SSE delivery", results["sse_delivery"], sse_delivery.COLUMNS)
    print_table("Reconnect", results["reconnect"])
    print_table("Fan-out", results["fanout"])
    print_table("Memory", results["memory"], memory.COLUMNS)
    print_table("Append", results["append"])
    print("\nseconds per bench:", {k: round(v, 1) for k, v in timings.items()})
    print("machine idle before each bench:", {k: f"{v:.0%}" for k, v in idle.items()})
    return results


def main() -> None:
    """`python -m bench.run_all`."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--store", choices=["both", "sqlite", "postgres"], default="both"
    )
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes: check that the benches run"
    )
    parser.add_argument("--json", help="also write every figure to this file")
    args = parser.parse_args()
    box: dict[str, Any] = {}

    async def go() -> None:
        box.update(await run_all(store_kinds(args.store), args.quick))

    run_loop(go())
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(box, fh, indent=1, default=str)


if __name__ == "__main__":
    main()
