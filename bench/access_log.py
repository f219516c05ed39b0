"""Access log: the CPU time the access layer adds to one request, around a bare ASGI app.

The layer logs one line (to memory), counts the request in the HTTP metrics and reads the
caller's key id that the `caller` dependency left in the scope; the bare app answers at once. CPU time (`process_time`), not
wall time, so a busy shared machine changes the figure less. Printed, never asserted.

    python -m bench.access_log [--requests 20000] [--format json|text]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import logging
import time
from typing import Any

from api.access_log import CALLER_KEY_ID, AccessLog
from engine.observability.logs import configure_logging

SCOPE: dict[str, Any] = {"type": "http", "method": "GET", "headers": [(b"x-api-key", b"second")]}


async def bare(scope: Any, receive: Any, send: Any) -> None:
    scope["path_template"] = "/api/v1/workflows/{workflowName}/runs/{runId}"
    scope["state"] = {CALLER_KEY_ID: "b"}
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"{}"})


async def receive() -> dict[str, Any]:
    return {}


async def send(message: Any) -> None:
    return None


async def cpu_per_request(app: Any, requests: int) -> float:
    """Microseconds of CPU per request."""
    began = time.process_time()
    for _ in range(requests):
        await app(dict(SCOPE), receive, send)
    return (time.process_time() - began) / requests * 1e6


async def main(requests: int, log_format: str) -> None:
    configure_logging(log_format, "INFO")
    handler = logging.getLogger().handlers[0]
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(io.StringIO())
    plain = await cpu_per_request(bare, requests)
    logged = await cpu_per_request(AccessLog(bare), requests)
    logging.getLogger().setLevel(logging.WARNING)
    counted = await cpu_per_request(AccessLog(bare), requests)
    print(f"bare app: {plain:.1f} us CPU per request")
    print(f"with the access layer, {log_format} line logged: {logged:.1f} us")
    print(f"with the access layer, line below the level (metrics and key id only): {counted:.1f} us")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--format", choices=["json", "text"], default="json")
    args = parser.parse_args()
    asyncio.run(main(args.requests, args.format))
