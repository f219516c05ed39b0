"""`flowtrail demo [WORKFLOW]`: start a run through the HTTP API and print its stream as it arrives."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import httpx
from httpx_sse import aconnect_sse

from engine.settings import Settings

TOPICS = {"demo-report": "event sourcing for agent workflows"}


def _line(event: str, data: dict[str, Any]) -> str | None:
    node = data.get("nodeId", "")
    if event == "node_status":
        extra = f" ({data['nodeType']}: {data['nodeLabel']})" if data.get("status") == "RUNNING" else ""
        error = f" - {data['error']}" if data.get("error") else ""
        return f"[{node}] {data['status']}{extra}{error}"
    if event == "node_stream":
        tool = f" {data['toolName']}" if data.get("toolName") else ""
        content = str(data.get("content", "")).replace("\n", " ")
        return f"[{node}] {data['kind']}{tool}: {content[:160]}"
    if event == "planner_decision":
        decision = data["decision"]
        return f"[planner] next={decision.get('nextNodeId')} because {decision.get('reason')}"
    if event == "visit_recorded":
        return None
    if event == "workflow_complete":
        return f"workflow_complete: {json.dumps(data.get('output'), ensure_ascii=False)[:400]}"
    return f"{event}: {data.get('error')}"


class StreamPrinter:
    """Prints one line per message, except thinking, which flows on as running text."""

    def __init__(self) -> None:
        self.thinking_visit: str | None = None

    def show(self, sse_id: str, event: str, data: dict[str, Any]) -> None:
        """Print one message."""
        if event == "node_stream" and data.get("kind") == "thinking":
            if self.thinking_visit != data["visitUuid"]:
                self.end_line()
                print(f"{sse_id:>5} [{data['nodeId']}] thinking: ", end="")
                self.thinking_visit = data["visitUuid"]
            print(data["content"], end="", flush=True)
            return
        line = _line(event, data)
        if line:
            self.end_line()
            print(f"{sse_id:>5} {line}", flush=True)

    def end_line(self) -> None:
        """Finish a running line of thinking."""
        if self.thinking_visit is not None:
            print()
            self.thinking_visit = None


async def _wait_until_up(client: httpx.AsyncClient) -> None:
    for _ in range(300):
        try:
            if (await client.get("/healthz")).status_code == 200:
                return
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.1)
    raise SystemExit("error: the service did not answer within 30 s")


async def _answer_if_asked(client: httpx.AsyncClient, run_id: str, data: dict[str, Any]) -> None:
    if data.get("kind") != "clarify_request":
        return
    asked = json.loads(data["content"])
    answer = (asked.get("choices") or ["yes"])[0]
    print(f"  -> answering {asked['question']!r} with {answer!r}")
    await client.post(f"/api/v1/runs/{run_id}/resume", json={"clarifyId": asked["clarify_id"], "answer": answer})


async def run_demo(workflow: str, url: str, key: str) -> int:
    """Create, start and follow one run; returns 0 when it succeeded."""
    timeout = httpx.Timeout(30.0, read=None)
    async with httpx.AsyncClient(base_url=url, headers={"X-API-Key": key}, timeout=timeout) as client:
        await _wait_until_up(client)
        body = {"variables": {"topic": TOPICS.get(workflow, "flowtrail")}, "async": True}
        created = (await client.post(f"/api/v1/workflows/{workflow}/runs", json=body)).json()
        if created.get("code") != "OK":
            print(f"error: {created.get('code')}: {created.get('message')}", file=sys.stderr)
            return 1
        run, links = created["data"], created["data"]["links"]
        print(f"run {run['runId']} of {run['workflowName']} created; watch it: GET {links['stream']}")
        await client.post(links["start"])
        printer = StreamPrinter()
        async with aconnect_sse(client, "GET", links["stream"]) as source:
            async for sse in source.aiter_sse():
                if not sse.data:
                    continue
                data = json.loads(sse.data)
                printer.show(sse.id, sse.event, data)
                await _answer_if_asked(client, run["runId"], data)
        printer.end_line()
        result = (await client.get(links["result"])).json()["data"]
        print(f"run {result['runId']} finished {result['status']}; result: GET {links['result']}")
        return 0 if result["status"] == "SUCCESS" else 1


def demo(workflow: str | None) -> int:
    """Run the demo (default: FLOWTRAIL_DEMO_WORKFLOW) against the configured service."""
    settings = Settings.from_env()
    key = settings.commands.demo_key or settings.api_keys[0].key
    return asyncio.run(run_demo(workflow or settings.commands.demo_workflow, f"http://{settings.host}:{settings.port}", key))
