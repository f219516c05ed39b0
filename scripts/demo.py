"""`flowtrail demo [WORKFLOW]`: start a run through the HTTP API and print its stream as it arrives."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from flowtrail_client import CreatedRun, FlowtrailClient, ServiceUnavailable
from scripts.connect import CommandSettings, command_key, connect, reported

TOPICS = {"demo-report": "event sourcing for agent workflows"}
WAIT_SECONDS = 5.0
"""How long `flowtrail demo` waits for a service that does not answer yet."""


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


SENTENCE_ENDS = (".", "!", "?", "\n")


class StreamPrinter:
    """Prints one line per message; thinking is gathered per visit and printed a sentence at a time, so the
    thinking of visits that run in parallel never breaks into each other's lines."""

    def __init__(self) -> None:
        self.thinking: dict[str, tuple[str, str, str]] = {}
        """Unprinted thinking by visit: (the SSE id of its first piece, the node, the text)."""

    def show(self, sse_id: str, event: str, data: dict[str, Any]) -> None:
        """Print one message (or keep a piece of thinking until its sentence ends)."""
        visit = str(data.get("visitUuid") or (data.get("visit") or {}).get("visitUuid") or "")
        if event == "node_stream" and data.get("kind") == "thinking":
            first, node, text = self.thinking.get(visit, (sse_id, str(data["nodeId"]), ""))
            text += str(data["content"])
            self.thinking[visit] = (first, node, text)
            if text.rstrip(" ").endswith(SENTENCE_ENDS):
                self.flush(visit)
            return
        for unfinished in [visit] if visit else list(self.thinking):
            self.flush(unfinished)
        line = _line(event, data)
        if line:
            print(f"{sse_id:>5} {line}", flush=True)

    def flush(self, visit: str) -> None:
        """Print a visit's thinking gathered so far as one line."""
        first, node, text = self.thinking.pop(visit, ("", "", ""))
        if text.strip():
            print(f"{first:>5} [{node}] thinking: {' '.join(text.split())}", flush=True)

    def finish(self) -> None:
        """Print every visit's unfinished thinking."""
        for visit in list(self.thinking):
            self.flush(visit)


async def wait_until_up(client: FlowtrailClient, seconds: float) -> None:
    """Wait up to `seconds` for the service to answer (it may be starting beside this command)."""
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        try:
            await client.health()
            return
        except ServiceUnavailable as away:
            if asyncio.get_running_loop().time() >= deadline:
                raise ServiceUnavailable(f"{away} (waited {seconds:g} s; is `flowtrail serve` running there? "
                                         "--url or FLOWTRAIL_URL names another)") from None
            await asyncio.sleep(0.2)


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
    await wait_until_up(client, WAIT_SECONDS)
    run = await client.create(workflow, {"topic": TOPICS.get(workflow, "flowtrail")})
    print(f"run {run.run_id} of {run.workflow_name} created; watch it: GET {run.links.stream}")
    await client.start(run)
    printer = StreamPrinter()
    async for message in client.stream(run):
        printer.show(str(message.id), message.event, message.data)
        await answer_if_asked(client, run, message.data)
    printer.finish()
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
