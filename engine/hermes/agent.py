"""One node's conversation with a Hermes gateway: a gateway run per answer, in the node's own session.

Each answer fetches the session's history and submits one run. The submission is recorded before
it is sent and the run's id as soon as the gateway gives it, before any of its events is copied,
so a run is never submitted twice for one attempt: a visit taken up again after a crash, a
takeover or a restart follows the run the log names (`GatewayRun`) instead. A run whose outcome
cannot be read is `remote_outcome_unknown`, and submitted again only when the node says that
repeating it is safe.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from typing import Any
from uuid import UUID

import httpx

from engine.hermes.client import GatewayClient, GatewayError
from engine.hermes.gateway_run import GatewayRun, HermesFailure, RemoteOutcomeUnknown
from engine.hermes.gateways import HermesGateway
from engine.hermes.ports import RemoteFacts, RemoteRunRecord, VisitSink

ORIGIN_INSTRUCTION = (
    "This request comes from flowtrail, a workflow engine, on behalf of one of its agent nodes. "
    "Answer the task yourself, directly; never delegate it back to flowtrail or call flowtrail's API."
)
"""The fixed recursion guard every run carries."""
HISTORY_ROWS = 40

__all__ = ["HermesFailure", "RemoteAgent", "RemoteOutcomeUnknown", "history_rows", "session_id_for"]
"""HermesFailure and RemoteOutcomeUnknown are what `answer` raises; they live with the run that raises them."""


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
    """Answers prompts through one gateway, in one session; `earlier` are the visit's gateway runs the log has."""

    def __init__(self, gateway: HermesGateway, key: str, sink: VisitSink, facts: RemoteFacts, *, session_id: str,
                 system_prompt: str = "", earlier: Sequence[RemoteRunRecord] = (), repeat_safe: bool = False,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.gateway = gateway
        self.key = key
        self.sink = sink
        self.facts = facts
        self.session_id = session_id
        self.system_prompt = system_prompt
        self.repeat_safe = repeat_safe
        self.transport = transport
        self.attempts = max((run.attempt for run in earlier), default=0)
        self._taken_up = earlier[-1] if earlier else None
        """The visit's last gateway run when the visit was taken up again: the first answer is that run's."""

    @property
    def resuming(self) -> bool:
        """True until the first answer, when the visit has a gateway run from before the engine stopped."""
        return self._taken_up is not None

    async def answer(self, prompt: str) -> str:
        """The answer to `prompt`: of the run the log names when the visit was taken up again, else of a new run.

        A run whose outcome cannot be read is submitted again (once) only when the node declares repeatSafe.
        """
        client = GatewayClient(self.gateway, self.key, transport=self.transport)
        try:
            earlier, self._taken_up = self._taken_up, None
            try:
                if earlier is not None:
                    return await self._earlier(client, earlier)
                return await self._submitted(client, prompt)
            except RemoteOutcomeUnknown as unknown:
                await self._repeat_or_raise(unknown)
            return await self._submitted(client, prompt)
        finally:
            await asyncio.shield(client.aclose())

    async def _earlier(self, client: GatewayClient, earlier: RemoteRunRecord) -> str:
        """The answer of the gateway run the engine was following when it stopped; it is not submitted again."""
        ended = earlier.ended
        if ended is not None:
            if ended.outcome == "completed":
                await self.sink.status(f"hermes run {ended.remote_run_id} had completed before the engine stopped; "
                                       "using its answer")
                return ended.output
            if ended.outcome == "unknown":
                raise RemoteOutcomeUnknown(ended.error or "the run's outcome could not be read")
            raise HermesFailure(ended.reason or f"run_{ended.outcome}", ended.error or f"the gateway run ended {ended.outcome}")
        run = GatewayRun(client, self.gateway, self.sink, self.facts, session_id=earlier.session_id,
                         attempt=earlier.attempt, remote_run_id=earlier.remote_run_id, requested_at=earlier.requested_at)
        if not earlier.remote_run_id:
            why = "the engine stopped after submitting it and before the gateway answered with its id"
            await run.end("unknown", reason="submission_unanswered", error=why)
            raise RemoteOutcomeUnknown(f"the gateway run of attempt {earlier.attempt} on gateway {self.gateway.id!r}: {why}")
        await self.sink.status(f"following {run.name} to its end (the engine stopped while following it; "
                               "it is not submitted again)")
        if earlier.stop_reason is not None:
            await run.stop(earlier.stop_reason, None)
            self.sink.check_cancel()
            raise HermesFailure(earlier.stop_reason, f"{run.name} was stopped")
        return await run.answer(stream=False)

    async def _repeat_or_raise(self, unknown: RemoteOutcomeUnknown) -> None:
        """Go on to submit the prompt again when the node says that is safe; else the visit fails as unknown."""
        if not self.repeat_safe:
            raise RemoteOutcomeUnknown(f"{unknown.detail}; it is not submitted again (the node does not declare repeatSafe)")
        await self.sink.status(f"the outcome of a gateway run is unknown ({unknown.detail}); "
                               "the node declares repeatSafe, so the prompt is submitted again")

    async def _submitted(self, client: GatewayClient, prompt: str) -> str:
        """One new gateway run for `prompt`: recorded, submitted once, followed to its end.

        The record, the request and the id's record run as one shielded step: a visit cut short meanwhile lets it
        end (so the log names the run), then stops the run, unless the process is handing it over.
        """
        body = await self._body(client, prompt)
        self.sink.check_cancel()
        self.attempts += 1
        submission = asyncio.ensure_future(self._submit(client, body, self.attempts))
        try:
            run = await asyncio.shield(submission)
        except asyncio.CancelledError:
            await asyncio.shield(self._cut_short(submission))
            raise
        await self.sink.status(f"{run.name} started on gateway {self.gateway.id!r}")
        return await run.answer(stream=True)

    async def _cut_short(self, submission: asyncio.Future[GatewayRun]) -> None:
        """The visit's task was cancelled while submitting: wait for the submission, then stop the run it started
        unless the process is handing its runs over."""
        try:
            run = await submission
        except (HermesFailure, GatewayError):
            return
        if not self.sink.handing_over:
            await run.stop("timeout", None)

    async def _submit(self, client: GatewayClient, body: dict[str, Any], attempt: int) -> GatewayRun:
        """Record the submission, `POST /v1/runs`, record the run's id; a failure is recorded as the run's end."""
        requested_at = await self.facts.requested(self.gateway.id, self.session_id, attempt)
        run = GatewayRun(client, self.gateway, self.sink, self.facts, session_id=self.session_id, attempt=attempt,
                         remote_run_id="", requested_at=requested_at)
        try:
            run.remote_run_id = await client.start_run(body, self.session_id)
        except GatewayError as error:
            if error.code == "lost":
                await run.end("unknown", reason="submission_lost", error=error.message)
                raise RemoteOutcomeUnknown(f"the submission to gateway {self.gateway.id!r} got no answer: {error.message}") from None
            await run.end("failed", reason=error.code, error=error.message)
            raise HermesFailure(error.code, error.message) from None
        await self.facts.accepted(attempt, run.remote_run_id)
        return run

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
