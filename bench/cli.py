"""What every bench command shares: the event loop it runs on and the `--store` option."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from bench.machine import wait_quiet


def run_loop(coro: Coroutine[Any, Any, Any]) -> None:
    """Run a coroutine on uvloop (what uvicorn picks for the server), else asyncio's loop."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(coro)
        return
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(coro)


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

    run_loop(go())
