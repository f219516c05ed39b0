"""Node executors, one per node type: each turns a visit's inputs into an output envelope.

`userInput` passes the run's variables on, `llm` / `smartAction` / `agent` talk to a model
(with declared outputs enforced), and `output` builds the run's result (and may write files
into the workspace). A missing template reference fails the visit, naming the reference.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from domain.errors import MissingReference
from domain.outputs import OutputEnvelope, build_instruction, retry_policy
from domain.templates import as_text, render_value
from domain.workflow import Declaration, ModelData, OutputData, SmartActionData, UserInputData
from engine.execution.agent_loop import Conversation, ToolBelt, opening_messages
from engine.execution.errors import VisitFailure
from engine.execution.remote import remote_conversation
from engine.execution.structured import structured_data
from engine.execution.visit import VisitContext
from engine.workspace.directory import UnsafePath

NODE_OK = "调用成功"

Executor = Callable[[VisitContext], Awaitable[OutputEnvelope]]


def envelope(data: Any) -> OutputEnvelope:
    """A node's success envelope `{status: 200, message: 调用成功, data}`."""
    return OutputEnvelope.succeeded(data, NODE_OK)


def render(value: Any, scope: dict[str, Any], where: str) -> Any:
    """A template value rendered against the scope; VisitFailure names a missing reference and where it is."""
    try:
        return render_value(value, scope)
    except MissingReference as error:
        raise VisitFailure(f"{where}: {error.message}") from None


def render_text(value: Any, scope: dict[str, Any], where: str) -> str:
    """A template rendered to text (non-strings as JSON)."""
    return as_text(render(value, scope, where))


async def user_input(ctx: VisitContext) -> OutputEnvelope:
    """The declared inputs from the run's variables (all variables when none are declared)."""
    variables = ctx.scope
    declared = ctx.data_as(UserInputData).inputs
    if not declared:
        return envelope({key: value for key, value in variables.items() if key in ctx.inputs.variables})
    missing = [item.name for item in declared if item.required and variables.get(item.name) in (None, "")]
    if missing:
        raise VisitFailure(f"required input(s) not given: {', '.join(missing)}")
    data = {item.name: variables[item.name] for item in declared if item.name in variables}
    if ctx.inputs.uploaded_files:
        data.setdefault("uploadedFiles", list(ctx.inputs.uploaded_files))
    return envelope(data)


def _turn_limit(ctx: VisitContext, data: ModelData) -> int:
    cap = ctx.settings.max_agent_iterations
    return min(data.max_iterations or cap, cap)


def _conversation(ctx: VisitContext, prompt: str, system: str | None, *, steps: bool) -> Conversation:
    data = ctx.data_as(ModelData)
    belt = ToolBelt(ctx, data.tools, toolbox=ctx.toolbox, ask_user=data.ask_user)
    return Conversation(ctx, opening_messages(prompt, system, ctx.answers), belt, max_turns=_turn_limit(ctx, data), steps=steps)


async def _model_data(ctx: VisitContext, fields: list[Declaration], *, steps: bool, extra: str = "") -> dict[str, Any]:
    """Run the node's conversation; the answer as validated data (declared outputs) or `{"text": ...}`."""
    node_data = ctx.data_as(ModelData)
    prompt = render_text(node_data.prompt, ctx.scope, "prompt")
    system = node_data.system_prompt
    system_text = render_text(system, ctx.scope, "systemPrompt") if system else None
    instruction = build_instruction(fields)
    full_prompt = "\n\n".join(part for part in (prompt, extra, instruction) if part)
    conversation = remote_conversation(ctx, full_prompt, system_text) if node_data.remote else _conversation(
        ctx, full_prompt, system_text, steps=steps)
    text = await conversation.answer()
    if fields:
        policy = retry_policy("agent" if node_data.remote else ctx.node.type, node_data)
        data = await structured_data(ctx, text, fields, policy, conversation.retry)
    else:
        data = {"text": text}
    if ctx.answers:
        data.setdefault("answer", ctx.answers[-1].answer)
    return data


async def llm(ctx: VisitContext) -> OutputEnvelope:
    """One model answer (tools only if the node lists them or context tools are offered)."""
    return envelope(await _model_data(ctx, ctx.data_as(ModelData).outputs, steps=False))


async def agent(ctx: VisitContext) -> OutputEnvelope:
    """A multi-turn tool loop, each turn a `step` in the stream."""
    return envelope(await _model_data(ctx, ctx.data_as(ModelData).outputs, steps=True))


async def smart_action(ctx: VisitContext) -> OutputEnvelope:
    """A model call whose answer chooses one of the node's actions (`data.action`, `data.reason`)."""
    node_data = ctx.data_as(SmartActionData)
    choices = node_data.choices
    if not choices:
        raise VisitFailure("a smartAction node needs data.actions: a non-empty list of action ids or {id, description}")
    ids = [choice.id for choice in choices]
    listed = "\n".join(f"- {choice.id}" + (f": {choice.description}" if choice.description else "") for choice in choices)
    extra = f"Choose exactly one action and put its id in the `action` field:\n{listed}"
    fields = [
        Declaration("action", "string", True, f"one of: {', '.join(ids)}"),
        Declaration("reason", "string", False, "why this action"),
        *[field for field in node_data.outputs if field.name not in ("action", "reason")],
    ]
    data = await _model_data(ctx, fields, steps=False, extra=extra)
    if data.get("action") not in ids:
        raise VisitFailure(
            f"the model chose action {data.get('action')!r}, which is not one of {', '.join(ids)}", "OUTPUT_INVALID")
    return envelope(data)


async def output(ctx: VisitContext) -> OutputEnvelope:
    """The run's result: each declared output's `value` template (default `{{name}}`); `files` are written."""
    node_data = ctx.data_as(OutputData)
    data = {item.name: render(item.template, ctx.scope, f"output {item.name!r}") for item in node_data.outputs}
    for index, item in enumerate(node_data.files):
        path = render_text(item.path, ctx.scope, f"files[{index}].path")
        content = render_text(item.content, ctx.scope, f"files[{index}].content")
        try:
            written = await asyncio.to_thread(ctx.workspace.write, ctx.run_id, path, content.encode("utf-8"))
        except UnsafePath as error:
            raise VisitFailure(f"files[{index}]: {error}") from None
        await ctx.status(f"wrote {written} ({len(content.encode('utf-8'))} bytes)")
    return envelope(data)


EXECUTORS: dict[str, Executor] = {
    "userInput": user_input,
    "llm": llm,
    "agent": agent,
    "smartAction": smart_action,
    "output": output,
}
