"""agent / smartAction visits on a remote Hermes gateway (node data `"backend": "hermes_remote"`).

The gateway runs its own tools, so a remote node offers none of ours (no built-ins, no context
tools, no `ask_user`). Its gateway runs are facts of the run's log (`VisitRemoteFacts`): a visit
taken up again follows the run the log names, and a run that ends with gateway runs still in
flight stops them first (`settle_remote_runs`), so the log never shows a run ended with remote
work it did not account for.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime
from functools import partial

import msgspec

from domain import remote_run
from domain.events import RunEvent
from domain.failures import FailureCode
from domain.workflow import REMOTE_BACKEND, ModelData
from engine.execution.errors import VisitFailure
from engine.execution.journal import Journal
from engine.execution.progress import Progress, VisitProgress
from engine.execution.visit import VisitContext
from engine.hermes.agent import HermesFailure, RemoteAgent, session_id_for
from engine.hermes.client import GatewayClient, gateway_key
from engine.hermes.gateway_run import GatewayRun
from engine.hermes.gateways import HermesGateway
from engine.hermes.ports import REMOTE_EVENTS, RemoteEnd, RemoteRunRecord, remote_runs
from engine.hermes.probe import probe, select_gateway
from engine.observability.tracing import failed, gateway_call_span

logger = logging.getLogger("flowtrail.engine")

REMOTE_NODE_TYPES = frozenset({"agent", "smartAction"})
OUTCOME_UNKNOWN = frozenset({"run_lost", "incomplete_stream", "remote_outcome_unknown"})
"""Hermes failures after which the gateway may have run the prompt, or still be running it: nobody can say."""


def remote_failure_code(hermes_code: str) -> FailureCode:
    """REMOTE_OUTCOME_UNKNOWN when the gateway run's outcome cannot be known, else REMOTE_FAILED."""
    return "REMOTE_OUTCOME_UNKNOWN" if hermes_code in OUTCOME_UNKNOWN else "REMOTE_FAILED"


class VisitRemoteFacts:
    """Appends a visit's gateway-run facts to its run's log (engine.hermes.ports.RemoteFacts), and to the visit's
    progress, so the session that appended them knows them too."""

    def __init__(self, journal: Journal, visit: VisitProgress) -> None:
        self.journal = journal
        self.visit = visit
        self.visit_uuid = visit.visit_uuid
        self.node_id = visit.node_id

    async def requested(self, gateway_id: str, session_id: str, attempt: int) -> datetime:
        """Record that a run is about to be submitted; when it was recorded."""
        (event,) = await self._decide(partial(remote_run.request_remote_run, gateway_id=gateway_id, session_id=session_id,
                                              attempt=attempt))
        return event.timestamp

    async def accepted(self, attempt: int, remote_run_id: str) -> None:
        """Record the run's id."""
        await self._decide(partial(remote_run.accept_remote_run, attempt=attempt, remote_run_id=remote_run_id))

    async def stop_requested(self, attempt: int, remote_run_id: str, reason: str) -> None:
        """Record that the gateway is asked to stop the run."""
        await self._decide(partial(remote_run.request_remote_stop, attempt=attempt, remote_run_id=remote_run_id, reason=reason))

    async def ended(self, end: RemoteEnd) -> None:
        """Record the run's end (its metering record)."""
        if self.visit_uuid not in self.journal.run.open_visits:
            logger.warning("visit %s closed before its gateway run %s ended", self.visit_uuid, end.remote_run_id)
            return
        await self._decide(partial(remote_run.end_remote_run, **msgspec.structs.asdict(end)))

    async def _decide(self, decision: Callable[..., RunEvent]) -> list[RunEvent]:
        events = await self.journal.decide(partial(decision, visit_uuid=self.visit_uuid, node_id=self.node_id))
        self.visit.remote_events.extend(event for event in events if isinstance(event, REMOTE_EVENTS))
        return events


class RemoteConversation:
    """A remote node's exchange: the first answer, then outer re-runs in the same gateway session."""

    def __init__(self, ctx: VisitContext, agent: RemoteAgent, prompt: str) -> None:
        self.ctx = ctx
        self.agent = agent
        self.prompt = prompt

    async def answer(self) -> str:
        """Check the gateway is usable (unless the visit follows a run it had submitted), then run the prompt with
        the visit's context section before it."""
        if self.agent.resuming:
            return await self._ask(self.prompt)
        result = await probe(self.agent.gateway, transport=self.agent.transport)
        if not result.ok:
            raise VisitFailure(f"hermes gateway {result.gateway!r} is {result.status}: {result.detail}", "REMOTE_FAILED")
        return await self._ask(await self._with_context(self.prompt))

    async def _with_context(self, prompt: str) -> str:
        """The prompt after what the visit may read of its predecessors (the gateway cannot call the context tools)."""
        context = self.ctx.context
        section = await context.section(self.ctx.run_id, self.ctx.visit.visit_uuid) if context is not None else None
        if section is None:
            return prompt
        await self.ctx.status(f"the prompt carries the context of earlier visits ({len(section.encode())} bytes)")
        return f"{section}\n\n{prompt}"

    async def retry(self, problem: str, instruction: str) -> str:
        """Re-run Hermes in the same session after its answer failed validation."""
        return await self._ask(
            f"Your answer did not pass validation: {problem}. Answer again with only the JSON object.\n\n{instruction}"
        )

    async def _ask(self, prompt: str) -> str:
        # Tracing: the one span of a gateway call (engine/observability/tracing.py); engine/hermes/ has none.
        with gateway_call_span(self.agent.gateway.id, self.agent.session_id) as traced:
            try:
                return await self.agent.answer(prompt)
            except HermesFailure as error:
                failure = VisitFailure(str(error), remote_failure_code(error.code))
                failed(traced, failure.code)
        raise failure


def usable_gateway(gateways: tuple[HermesGateway, ...], wanted: str | None) -> tuple[HermesGateway, str]:
    """The gateway a node names (the only one when it names none) and its key; VisitFailure says why there is none."""
    gateway = select_gateway(gateways, wanted)
    if gateway is None:
        named = f"gateway {wanted!r}" if wanted else "a gateway (name one in data.gateway)"
        raise VisitFailure(f"hermes not_configured: {named} is not in FLOWTRAIL_HERMES_GATEWAYS", "REMOTE_FAILED")
    if not gateway.enabled:
        raise VisitFailure(f"hermes gateway {gateway.id!r} is disabled (enabled: false in FLOWTRAIL_HERMES_GATEWAYS)", "REMOTE_FAILED")
    key = gateway_key(gateway)
    if key is None:
        raise VisitFailure(f"hermes gateway {gateway.id!r} is key_missing: {gateway.api_key_env} is not set", "REMOTE_FAILED")
    return gateway, key


def remote_conversation(ctx: VisitContext, prompt: str, system: str | None) -> RemoteConversation:
    """The conversation of a remote visit, on the gateway the node names (the only one when it names none)."""
    data = ctx.data_as(ModelData)
    if ctx.node.type not in REMOTE_NODE_TYPES:
        raise VisitFailure(f"backend {REMOTE_BACKEND!r} runs agent and smartAction nodes, not {ctx.node.type}")
    if data.tools or data.ask_user:
        raise VisitFailure("a hermes_remote node offers no flowtrail tools (the gateway runs its own): drop data.tools/askUser")
    gateway, key = usable_gateway(ctx.settings.hermes_gateways, data.gateway)
    system_prompt = "\n\n".join(part for part in (gateway.system_prompt, system or "") if part)
    facts = VisitRemoteFacts(ctx.journal, ctx.visit)
    agent = RemoteAgent(gateway, key, ctx, facts, session_id=session_id_for(ctx.run_id, ctx.node.id),
                        system_prompt=system_prompt, earlier=remote_runs(ctx.visit.remote_events),
                        repeat_safe=data.repeat_safe)
    return RemoteConversation(ctx, agent, prompt)


def in_flight(visit: VisitProgress) -> RemoteRunRecord | None:
    """The visit's gateway run the log shows as not ended, if any."""
    runs = remote_runs(visit.remote_events)
    return runs[-1] if runs and runs[-1].ended is None else None


async def settle_remote_runs(journal: Journal, progress: Progress, gateways: tuple[HermesGateway, ...],
                             reason: str) -> None:
    """Stop every gateway run the run's open visits still have in flight, each recorded as it ends (the run ends next)."""
    for visit in progress.open_visits():
        record = in_flight(visit)
        if record is not None:
            await _settle(VisitRemoteFacts(journal, visit), record, gateways, reason)


class _SettlingSink:
    """Where a gateway run stopped as its run ends writes: its visit's stream (the visit is still open), no cancel signal."""

    def __init__(self, facts: VisitRemoteFacts) -> None:
        self.facts = facts
        self.cancel_event = asyncio.Event()

    @property
    def handing_over(self) -> bool:
        """Never: the run is ending here."""
        return False

    async def stream(self, kind: str, content: str, tool_name: str | None = None) -> None:
        """Append one chunk to the visit's stream."""
        await self.facts.journal.stream(visit_uuid=self.facts.visit_uuid, node_id=self.facts.node_id, kind=kind,
                                        content=content, tool_name=tool_name)

    async def status(self, text: str) -> None:
        """Append a status line."""
        await self.stream("status", text)

    def check_cancel(self) -> None:
        """Nothing to halt: the run is ending already."""


async def _settle(facts: VisitRemoteFacts, record: RemoteRunRecord, gateways: tuple[HermesGateway, ...],
                  reason: str) -> None:
    gateway = select_gateway(gateways, record.gateway_id)
    key = gateway_key(gateway) if gateway is not None else None
    if gateway is None or key is None or not record.remote_run_id:
        why = "the gateway never gave its id" if not record.remote_run_id else "the gateway is no longer configured"
        await facts.ended(RemoteEnd(gateway_id=record.gateway_id, session_id=record.session_id, attempt=record.attempt,
                                    outcome="unknown", remote_run_id=record.remote_run_id, reason=reason,
                                    error=f"not stopped: {why}"))
        return
    client = GatewayClient(gateway, key)
    try:
        run = GatewayRun(client, gateway, _SettlingSink(facts), facts, session_id=record.session_id,
                         attempt=record.attempt, remote_run_id=record.remote_run_id, requested_at=record.requested_at)
        await run.stop(reason, None)
    finally:
        await client.aclose()
