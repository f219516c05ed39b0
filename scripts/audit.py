"""`flowtrail audit RUN_ID`: check the run's hash chain and rebuild every projection from its events (read over
HTTP), and diff them with the service.

Everything comes from the service through the client: the served projections, the stored
events (JSON Lines) and the SSE replay. No store is opened, so no database credentials are needed.
"""

from __future__ import annotations

import json
from contextlib import aclosing
from typing import Any

import msgspec

from domain.chain_check import check_lines
from domain.events import AnyRunEvent, RunEvent
from flowtrail_client import FlowtrailClient, RunHandle
from projections.audit import diff, rebuild
from scripts.connect import CommandSettings, api_key, connect, reported, served_key

_decoder = msgspec.json.Decoder(AnyRunEvent)
"""A run's stored events, decoded by their tags over the domain's union (as the store decodes them)."""


async def logged_events(client: FlowtrailClient, run_id: str, upto: int) -> tuple[list[RunEvent], list[bytes]]:
    """The run's stored events up to a position, decoded as the store decodes them, and their lines."""
    events: list[RunEvent] = []
    raw: list[bytes] = []
    async with aclosing(client.events(run_id)) as lines:
        async for line in lines:
            if line.position > upto:
                break
            events.append(_decoder.decode(line.raw))
            raw.append(line.raw)
    return events, raw


async def served_stream(client: FlowtrailClient, run: RunHandle, last_id: int) -> list[list[Any]]:
    """The stream as the service replays it, up to a position: `[id, event, data]` each."""
    got: list[list[Any]] = []
    if last_id == 0:
        return got
    async with aclosing(client.stream(run)) as messages:
        async for message in messages:
            got.append([message.id, message.event, message.data])
            if message.id >= last_id:
                break
    return got


async def audit(client: FlowtrailClient, run_id: str) -> int:
    """Print every difference between the log and what the service serves; 1 when there is any."""
    served = await client.audit(run_id)
    events, lines = await logged_events(client, run_id, served.last_event_id)
    chain = check_lines(lines)
    problems = [f"$.chain: {problem}" for problem in chain.problems]
    views, messages = rebuild(events)
    problems += diff(views, served.views)
    expected_stream = [[m.id, m.event, json.loads(m.data)] for m in messages]
    last_visible = expected_stream[-1][0] if expected_stream else 0
    run = RunHandle(run_id, views["summary"]["workflowName"])
    problems += diff(expected_stream, await served_stream(client, run, last_visible), "$.stream")
    print(f"run {run_id}: {len(events)} events, {len(expected_stream)} stream messages, "
          f"{len(views['visits'])} visits audited at position {served.last_event_id}; "
          f"hash chain head {chain.head or '-'}")
    for line in problems:
        print(f"  DIFF {line}")
    print("OK: every projection matches the log" if not problems else f"FAILED: {len(problems)} differences")
    return 1 if problems else 0


def audit_run(run_id: str, *, url: str | None = None, key: str | None = None) -> int:
    """`flowtrail audit`: exit status 0 when everything matches, 1 on any difference or when the run is not found."""
    async def work() -> int:
        async with connect(url, api_key(key, CommandSettings.from_env().audit_key, served_key())) as client:
            return await audit(client, run_id)

    return reported(work)
