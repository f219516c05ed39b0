"""One node's conversation with a Hermes gateway: a run per answer, in the node's own session.

Each answer fetches the session's history, submits one run (never re-submitted), copies every
event into the visit's log as it arrives, answers approval requests as configured, and ends on
the run's terminal event. Idle streams and cancels stop the gateway run within a bounded window;
a dropped connection is followed up by reading the run's status, never by a second submission.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from typing import Any, Protocol
from uuid import UUID

import httpx
import msgspec

from engine.hermes.client import GatewayClient, GatewayError, StreamDropped, StreamIdle
from engine.hermes.events import TERMINAL_EVENTS, chunk_for
from engine.hermes.gateways import HermesGateway

logger = logging.getLogger("flowtrail.hermes")

ORIGIN_INSTRUCTION = (
    "This request comes from flowtrail, a workflow engine, on behalf of one of its agent nodes. "
    "Answer the task yourself, directly; never delegate it back to flowtrail or call flowtrail's API."
)
"""The fixed recursion guard every run carries."""
HISTORY_ROWS = 40
STOP_WINDOW_SECONDS = 5.0
"""How long a cancel or an idle timeout waits for the gateway to take the stop request."""
STATUS_POLL_SECONDS = 0.5


def _json(value: Any) -> str:
    return msgspec.json.encode(value).decode()


class HermesFailure(Exception):
    """A Hermes run that gave no answer; `code` says why (`run_failed`, `idle_timeout`, `incomplete_stream`...)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"hermes {code}: {message}")
        self.code = code


class VisitSink(Protocol):
    """Where a Hermes answer writes its progress: the visit's stream, status lines and cancel signal."""

    cancel_event: asyncio.Event

    async def stream(self, kind: str, content: str, tool_name: str | None = None) -> None:
        """Append one chunk to the visit's stream."""
        ...

    async def status(self, text: str) -> None:
        """Append a status line."""
        ...

    def check_cancel(self) -> None:
        """Raise the engine's halt when the run's cancel was requested."""
        ...


def session_id_for(run_id: UUID, node_id: str) -> str:
    """The gateway session of one node of one run: every visit of the node resumes it."""
    return f"flowtrail-{run_id.hex}-{hashlib.sha256(node_id.encode()).hexdigest()[:12]}"


def history_rows(messages: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The session's non-empty user/assistant rows (tool rows left out), the last 40."""
    rows = [
        {"role": row["role"], "content": row["content"]}
        for row in messages
        if row.get("role") in ("user", "assistant") and isinstance(row.get("content"), str) and row["content"].strip()
    ]
    return rows[-HISTORY_ROWS:]


class RemoteAgent:
    """Answers prompts through one gateway, in one session."""

    def __init__(self, gateway: HermesGateway, key: str, sink: VisitSink, *, session_id: str,
                 system_prompt: str = "", transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.gateway = gateway
        self.key = key
        self.sink = sink
        self.session_id = session_id
        self.system_prompt = system_prompt
        self.transport = transport

    async def answer(self, prompt: str) -> str:
        """One gateway run for `prompt`; its final text."""
        client = GatewayClient(self.gateway, self.key, transport=self.transport)
        try:
            body = await self._body(client, prompt)
            self.sink.check_cancel()
            try:
                run_id = await client.start_run(body, self.session_id)
            except GatewayError as error:
                raise HermesFailure(error.code, error.message) from None
            await self.sink.status(f"hermes run {run_id} started on gateway {self.gateway.id!r}")
            try:
                return await self._outcome(client, run_id)
            except asyncio.CancelledError:
                await asyncio.shield(self._stop(client, run_id))
                raise
        finally:
            await asyncio.shield(client.aclose())

    async def _body(self, client: GatewayClient, prompt: str) -> dict[str, Any]:
        try:
            messages = await client.session_messages(self.session_id)
        except GatewayError as error:
            raise HermesFailure(error.code, error.message) from None
        instructions = ORIGIN_INSTRUCTION
        body: dict[str, Any] = {"input": prompt, "session_id": self.session_id}
        if messages is None:
            if self.system_prompt:
                instructions += "\n\n" + self.system_prompt
            await self.sink.status(f"hermes session {self.session_id} is new: starting it fresh")
        else:
            history = history_rows(messages)
            body["conversation_history"] = history
            await self.sink.status(f"hermes session {self.session_id} resumed with {len(history)} earlier message(s)")
        body["instructions"] = instructions
        if self.gateway.model:
            body["model"] = self.gateway.model
        if self.gateway.effort:
            body["model_options"] = {"reasoning_effort": self.gateway.effort}
        return body

    async def _outcome(self, client: GatewayClient, run_id: str) -> str:
        """The run's answer, unless the run's cancel comes first (then the gateway run is stopped)."""
        follow = asyncio.ensure_future(self._follow(client, run_id))
        cancelled = asyncio.ensure_future(self.sink.cancel_event.wait())
        try:
            done, _ = await asyncio.wait({follow, cancelled}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            cancelled.cancel()
            if not follow.done():
                follow.cancel()
                await asyncio.gather(follow, return_exceptions=True)
        if follow in done:
            return follow.result()
        await self._stop(client, run_id)
        await self.sink.status(f"hermes run {run_id} was stopped (the flowtrail run was cancelled)")
        self.sink.check_cancel()
        raise HermesFailure("cancelled", "the flowtrail run was cancelled; the gateway run was stopped")

    async def _follow(self, client: GatewayClient, run_id: str) -> str:
        text: list[str] = []
        idle = self.gateway.idle_timeout_seconds
        try:
            async with contextlib.aclosing(client.events(run_id, idle)) as events:
                async for event in events:
                    answer = await self._take(client, run_id, event, text)
                    if answer is not None:
                        return answer
        except StreamIdle:
            await self._stop(client, run_id)
            raise HermesFailure("idle_timeout", f"no event from the gateway for {idle:g} s; the gateway run was stopped") from None
        except StreamDropped as error:
            await self.sink.status(f"the gateway's event stream dropped ({error}); reading the run's outcome")
            return await self._poll(client, run_id, text)
        except GatewayError as error:
            raise HermesFailure(error.code, error.message) from None
        raise HermesFailure("incomplete_stream", "the gateway's event stream ended without a terminal event")

    async def _take(self, client: GatewayClient, run_id: str, event: dict[str, Any], text: list[str]) -> str | None:
        """Copy one event into the log and act on it; the answer when the event ends the run."""
        chunk = chunk_for(event)
        if chunk is not None:
            await self.sink.stream(chunk.kind, chunk.content, chunk.tool_name)
        kind = event.get("event")
        if kind == "message.delta":
            text.append(str(event.get("delta", "")))
        elif kind == "approval.request":
            await self._approve(client, run_id)
        elif kind in TERMINAL_EVENTS:
            return await self._ended(str(kind), event, text)
        return None

    async def _ended(self, kind: str, event: dict[str, Any], text: list[str]) -> str:
        if kind == "run.completed":
            output = event.get("output")
            usage = event.get("usage")
            await self.sink.status("hermes run completed" + (f" (usage {_json(usage)})" if usage else ""))
            return output if isinstance(output, str) and output else "".join(text)
        if kind == "run.failed":
            raise HermesFailure("run_failed", str(event.get("error") or "the gateway run failed"))
        raise HermesFailure("run_cancelled", "the gateway run was cancelled")

    async def _approve(self, client: GatewayClient, run_id: str) -> None:
        choice = "once" if self.gateway.auto_approve else "deny"
        try:
            await client.answer_approval(run_id, choice)
        except GatewayError as error:
            if error.error_code == "approval_not_pending":
                return
            await self._stop(client, run_id)
            raise HermesFailure("approval_failed", f"answering the approval request failed: {error.message}") from None
        await self.sink.status(f"hermes approval request answered {choice!r} (auto_approve={self.gateway.auto_approve})")

    async def _poll(self, client: GatewayClient, run_id: str, text: list[str]) -> str:
        """The outcome of a run whose stream is lost, from `GET /v1/runs/{id}` (bounded by the idle timeout)."""
        loop = asyncio.get_running_loop()
        last_change, last_seen = loop.time(), None
        while True:
            try:
                status = await client.run_status(run_id)
            except GatewayError as error:
                raise HermesFailure("run_lost", f"the run's status cannot be read: {error.message}") from None
            state = status.get("status")
            if state == "completed":
                return await self._ended("run.completed", status, text)
            if state == "failed":
                return await self._ended("run.failed", status, text)
            if state == "cancelled":
                return await self._ended("run.cancelled", status, text)
            if state == "waiting_for_approval":
                await self._approve(client, run_id)
            if status.get("updated_at") != last_seen:
                last_change, last_seen = loop.time(), status.get("updated_at")
            elif loop.time() - last_change > self.gateway.idle_timeout_seconds:
                await self._stop(client, run_id)
                raise HermesFailure("idle_timeout", "the run's status did not change within the idle timeout")
            await asyncio.sleep(STATUS_POLL_SECONDS)

    async def _stop(self, client: GatewayClient, run_id: str) -> None:
        """Ask the gateway to stop the run, waiting at most STOP_WINDOW_SECONDS; a failure is logged, not raised."""
        try:
            async with asyncio.timeout(STOP_WINDOW_SECONDS):
                await client.stop(run_id)
        except (TimeoutError, GatewayError) as error:
            logger.warning("could not stop hermes run %s on gateway %s: %s", run_id, self.gateway.id, error)
