"""Structured output for a visit: the domain's two-level retry wired to the visit's models and stream.

Inner retries re-format the answer with `reformat_model_id` (else the default model), with
no tools; outer retries ask the node again in the same conversation. Each retry is a
`status` line in the visit's stream; when retries run out the visit fails naming what was
missing or mistyped. Each re-format and re-run spends one retry of the visit's budget, the
one its model-call retries spend too (seed query-task-architecture: every layer counts).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from domain.outputs import RetryPolicy, build_instruction, extract_with_retry
from domain.workflow import Declaration
from engine.execution.errors import VisitFailure
from engine.execution.visit import VisitContext
from engine.llm import CompletionRequest, Message

Rerun = Callable[[str, str], Awaitable[str]]


def spend(ctx: VisitContext, layer: str) -> None:
    """Take one retry from the visit's budget for a re-format or re-run; VisitFailure when none is left."""
    if not ctx.budget.take():
        raise VisitFailure(
            f"retry budget exhausted: the answer still fails validation, and the visit has spent all "
            f"{ctx.budget.limit} of its retries (model-call retries, re-formats and re-runs count together) "
            f"before another {layer}", "OUTPUT_INVALID",
        )


async def structured_data(
    ctx: VisitContext, text: str, fields: list[Declaration], policy: RetryPolicy, rerun: Rerun,
) -> dict[str, Any]:
    """The validated output data of an answer, after as many retries as the policy allows.

    Each retry's status line is the domain's attempt line, naming whose answer (the node's or a
    re-format's) had which problem; a re-run is told the problem of the node's own answer.
    """
    reruns = 0

    async def reformat(prompt: str) -> str:
        spend(ctx, "re-format")
        request = CompletionRequest(messages=[Message("user", prompt)], purpose="reformat", response_format_json=True)
        return (await ctx.calls.complete(ctx.models.reformat_model_id(), ctx.models.reformat(), request)).text

    async def rerun_node(problem: str) -> str:
        nonlocal reruns
        spend(ctx, "re-run")
        reruns += 1
        return await rerun(problem, build_instruction(fields))

    result = await extract_with_retry(
        text, fields, policy, reformat=reformat, rerun=rerun_node, note=ctx.status,
    )
    if not result.ok:
        raise VisitFailure(result.error or "output does not match the declared fields", "OUTPUT_INVALID")
    if reruns and not result.attempts[-1].startswith("re-formatted"):
        await ctx.status(f"re-run output is valid ({reruns}/{policy.runtime_max_retries})")
    return result.data
