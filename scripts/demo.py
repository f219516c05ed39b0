"""`flowtrail demo [WORKFLOW]`: start a run through the HTTP API and print its stream as it arrives."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from flowtrail_client import CreatedRun, FlowtrailClient, ServiceUnavailable
from scripts.connect import CommandSettings, command_key, connect, reported

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


async def wait_until_up(client: FlowtrailClient) -> None:
    """Wait for the service to answer (it may be starting beside this command)."""
    for _ in range(300):
        try:
            await client.health()
            return
        except ServiceUnavailable:
            await asyncio.sleep(0.1)
    raise SystemExit("error: the service did not answer within 30 s")


async def answer_if_asked(client: FlowtrailClient, run: CreatedRun, data: dict[str, Any]) -> None:
    """Answer a clarify question with its first choice."""
    if data.get("kind") != "clarify_request":
        return
    asked = json.loads(data["content"])
    answer = (asked.get("choices") or ["yes"])[0]
    print(f"  -> answering {asked['question']!r} with {answer!r}")
    await client.answer(run, asked["clarify_id"], answer)


async def run_demo(client: FlowtrailClient, workflow: str) -> int:
    """Create, start and follow one run; returns 0 when it succeeded."""
    await wait_until_up(client)
    run = await client.create(workflow, {"topic": TOPICS.get(workflow, "flowtrail")})
    print(f"run {run.run_id} of {run.workflow_name} created; watch it: GET {run.links.stream}")
    await client.start(run)
    printer = StreamPrinter()
    async for message in client.stream(run):
        printer.show(str(message.id), message.event, message.data)
        await answer_if_asked(client, run, message.data)
    printer.end_line()
    result = await client.get(run)
    print(f"run {result.run_id} finished {result.status}; result: GET {run.links.result}")
    return 0 if result.status == "SUCCESS" else 1


def demo(workflow: str | None, *, url: str | None = None, key: str | None = None) -> int:
    """Run the demo (default: FLOWTRAIL_DEMO_WORKFLOW) against the service (key: --key, FLOWTRAIL_API_KEY,
    FLOWTRAIL_DEMO_KEY, else the service's first)."""
    async def work() -> int:
        commands = CommandSettings.from_env()
        async with connect(url, command_key(key)) as client:
            return await run_demo(client, workflow or commands.demo_workflow)

    return reported(work)
