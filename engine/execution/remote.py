"""agent / smartAction visits on a remote Hermes gateway (node data `"backend": "hermes_remote"`).

The gateway runs its own tools, so a remote node offers none of ours (no built-ins, no context
tools, no `ask_user`); its prompt templates reference predecessor outputs instead.
"""

from __future__ import annotations

from domain.failures import FailureCode
from domain.workflow import REMOTE_BACKEND, ModelData
from engine.execution.errors import VisitFailure
from engine.execution.visit import VisitContext
from engine.hermes.agent import HermesFailure, RemoteAgent, session_id_for
from engine.hermes.client import gateway_key
from engine.hermes.probe import probe, select_gateway
from engine.observability.tracing import failed, gateway_call_span

REMOTE_NODE_TYPES = frozenset({"agent", "smartAction"})
OUTCOME_UNKNOWN = frozenset({"run_lost", "incomplete_stream", "outcome_unknown"})
"""Hermes failures after which the gateway may have run the prompt, or still be running it: nobody can say."""


def remote_failure_code(hermes_code: str) -> FailureCode:
    """REMOTE_OUTCOME_UNKNOWN when the gateway run's outcome cannot be known, else REMOTE_FAILED."""
    return "REMOTE_OUTCOME_UNKNOWN" if hermes_code in OUTCOME_UNKNOWN else "REMOTE_FAILED"


class RemoteConversation:
    """A remote node's exchange: the first answer, then outer re-runs in the same gateway session."""

    def __init__(self, ctx: VisitContext, agent: RemoteAgent, prompt: str) -> None:
        self.ctx = ctx
        self.agent = agent
        self.prompt = prompt

    async def answer(self) -> str:
        """Check the gateway is usable, then run the prompt."""
        result = await probe(self.agent.gateway, transport=self.agent.transport)
        if not result.ok:
            raise VisitFailure(f"hermes gateway {result.gateway!r} is {result.status}: {result.detail}", "REMOTE_FAILED")
        return await self._ask(self.prompt)

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


def remote_conversation(ctx: VisitContext, prompt: str, system: str | None) -> RemoteConversation:
    """The conversation of a remote visit, on the gateway the node names (the only one when it names none)."""
    data = ctx.data_as(ModelData)
    if ctx.node.type not in REMOTE_NODE_TYPES:
        raise VisitFailure(f"backend {REMOTE_BACKEND!r} runs agent and smartAction nodes, not {ctx.node.type}")
    if data.tools or data.ask_user:
        raise VisitFailure("a hermes_remote node offers no flowtrail tools (the gateway runs its own): drop data.tools/askUser")
    wanted = data.gateway
    gateway = select_gateway(ctx.settings.hermes_gateways, wanted)
    if gateway is None:
        named = f"gateway {wanted!r}" if wanted else "a gateway (name one in data.gateway)"
        raise VisitFailure(f"hermes not_configured: {named} is not in FLOWTRAIL_HERMES_GATEWAYS", "REMOTE_FAILED")
    key = gateway_key(gateway)
    if key is None:
        raise VisitFailure(f"hermes gateway {gateway.id!r} is key_missing: {gateway.api_key_env} is not set", "REMOTE_FAILED")
    system_prompt = "\n\n".join(part for part in (gateway.system_prompt, system or "") if part)
    agent = RemoteAgent(gateway, key, ctx, session_id=session_id_for(ctx.run_id, ctx.node.id), system_prompt=system_prompt)
    return RemoteConversation(ctx, agent, prompt)
