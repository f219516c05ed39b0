"""`flowtrail audit RUN_ID`: rebuild every projection from the log and diff it with the service."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any
from uuid import UUID

import httpx
from httpx_sse import aconnect_sse

from engine.settings import Settings
from engine.store import EventStore, parse_database_url
from projections.audit import diff, rebuild


def _default_key(settings: Settings) -> str:
    return settings.commands.audit_key or settings.api_keys[0].key


async def _served(url: str, key: str, run_id: UUID) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=url, headers={"X-API-Key": key}, timeout=30.0) as client:
        response = await client.get(f"/api/v1/runs/{run_id.hex}/audit")
        body = response.json()
        if response.status_code != 200:
            raise SystemExit(f"error: the service answered {response.status_code} {body.get('code')}: {body.get('message')}")
        return body["data"]


async def _served_stream(url: str, key: str, run_id: UUID, workflow: str, last_id: int) -> list[tuple[int, str, Any]]:
    got: list[tuple[int, str, Any]] = []
    if last_id == 0:
        return got
    headers = {"X-API-Key": key}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=httpx.Timeout(30.0, read=60.0)) as client:
        path = f"/api/v1/workflows/{workflow}/runs/{run_id.hex}/stream"
        async with aconnect_sse(client, "GET", path) as source:
            async for sse in source.aiter_sse():
                if not sse.data:
                    continue
                got.append((int(sse.id), sse.event, json.loads(sse.data)))
                if int(sse.id) >= last_id:
                    break
    return got


def audit_run(run_id: str, *, url: str | None = None, key: str | None = None) -> int:
    """Print every difference; exit status 1 when there is any."""
    try:
        stream_id = UUID(run_id)
    except ValueError:
        print(f"error: {run_id!r} is not a run id", file=sys.stderr)
        return 2
    settings = Settings.from_env()
    url = url or f"http://{settings.host}:{settings.port}"
    key = key or _default_key(settings)
    served = asyncio.run(_served(url, key, stream_id))
    store = EventStore(parse_database_url(settings.store.database_url))
    try:
        events = store.read_stream(stream_id, upto=served["lastEventId"])
    finally:
        store.close()
    views, messages = rebuild(events)
    problems = diff(views, served["views"])
    expected_stream = [(m.id, m.event, json.loads(m.data)) for m in messages]
    last_visible = expected_stream[-1][0] if expected_stream else 0
    workflow = views["summary"]["workflowName"]
    served_stream = asyncio.run(_served_stream(url, key, stream_id, workflow, last_visible))
    problems += diff([list(m) for m in expected_stream], [list(m) for m in served_stream], "$.stream")
    print(f"run {stream_id.hex}: {len(events)} events, {len(expected_stream)} stream messages, "
          f"{len(views['visits'])} visits audited at position {served['lastEventId']}")
    for line in problems:
        print(f"  DIFF {line}")
    print("OK: every projection matches the log" if not problems else f"FAILED: {len(problems)} differences")
    return 1 if problems else 0
