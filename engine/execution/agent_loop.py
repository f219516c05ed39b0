"""The model conversation of llm, smartAction and agent visits: turns, tool calls, questions.

One turn streams the model's answer into the visit (thinking, status, TODO list, tool
progress); tool calls run and their results go back to the model; a turn without tool calls
is the final answer. Every turn begins at a safe point where a cancel request stops the run.
"""

from __future__ import annotations

import uuid
from typing import Any

import msgspec

from engine.execution.errors import PauseForAnswer, VisitFailure
from engine.execution.progress import Answer
from engine.execution.tools import ASK_USER, BUILTIN_TOOLS, ToolError, unknown_tools
from engine.execution.visit import VisitContext
from engine.llm import (
    ClarifyAsk,
    CompletionRequest,
    Message,
    ReasoningDelta,
    StatusNote,
    TodoUpdate,
    ToolCall,
    ToolProgress,
    ToolSpec,
)
from projections.wire import to_json

CLARIFY_NAMESPACE = uuid.UUID("0b7c4f4e-3a52-4d55-9d0e-51f3b1b3a9c2")


class ToolBelt:
    """The tools one visit offers: the node's built-ins, the context toolbox, and `ask_user` when allowed."""

    def __init__(self, ctx: VisitContext, names: list[str], *, toolbox: Any = None, ask_user: bool = False) -> None:
        missing = unknown_tools(names)
        if missing:
            raise VisitFailure(f"the node lists unknown tool(s): {', '.join(missing)} (known: {', '.join(BUILTIN_TOOLS)})")
        self.ctx = ctx
        self.builtins = [BUILTIN_TOOLS[name] for name in dict.fromkeys(names)]
        self.toolbox = toolbox
        self.ask_user = ask_user

    def specs(self) -> list[ToolSpec]:
        """What the model is told it may call."""
        specs = [tool.spec for tool in self.builtins]
        if self.toolbox is not None:
            specs += list(self.toolbox.specs())
        if self.ask_user:
            specs.append(ASK_USER)
        return specs

    async def call(self, call: ToolCall) -> str:
        """Run one call; any refusal comes back as `{"error": ...}` JSON text, for the model to read."""
        try:
            args = msgspec.json.decode(call.arguments or "{}")
        except msgspec.DecodeError as error:
            return tool_error(f"arguments are not valid JSON: {error}")
        if not isinstance(args, dict):
            return tool_error("arguments must be a JSON object")
        builtin = next((tool for tool in self.builtins if tool.spec.name == call.name), None)
        if builtin is not None:
            try:
                return await builtin.run(self.ctx, args)
            except ToolError as error:
                return tool_error(str(error))
        if self.toolbox is not None and call.name in self.toolbox.names:
            try:
                return await self.toolbox.call(call.name, args)
            except Exception as error:  # noqa: BLE001 - a context tool's failure is the model's to read
                return tool_error(f"{call.name} failed ({type(error).__name__})")
        return tool_error(f"no tool named {call.name!r} is available to this node")


def tool_error(message: str) -> str:
    """A refused tool call as the model reads it, the same shape as the context tools': `{"error": message}`."""
    return to_json({"error": message})


def opening_messages(prompt: str, system: str | None, answers: list[Answer]) -> list[Message]:
    """The conversation a visit starts (or resumes) with: system, prompt, then each earlier question and answer."""
    messages = [Message("system", system)] if system else []
    messages.append(Message("user", prompt))
    for answer in answers:
        messages.append(Message("assistant", answer.question))
        messages.append(Message("user", f"The user answered: {answer.answer}"))
    return messages


class Conversation:
    """A visit's exchange with its model; the same conversation serves outer re-runs (seed §4.6)."""

    def __init__(self, ctx: VisitContext, messages: list[Message], belt: ToolBelt, *,
                 max_turns: int, steps: bool) -> None:
        self.ctx = ctx
        self.messages = messages
        self.belt = belt
        self.max_turns = max_turns
        self.steps = steps
        self._prev_tools: list[str] = []

    async def answer(self) -> str:
        """Play turns until the model answers without calling a tool."""
        for _ in range(self.max_turns):
            text, calls = await self._turn()
            if not calls:
                self.messages.append(Message("assistant", text))
                return text
            self.messages.append(Message("assistant", text or None, tool_calls=calls))
            for call in calls:
                await self._run_tool(call)
            self._prev_tools = [call.name for call in calls]
        raise VisitFailure(f"no final answer after {self.max_turns} model turns (the node's turn limit)", "BUDGET_EXHAUSTED")

    async def retry(self, problem: str, instruction: str) -> str:
        """Ask again in the same conversation after the answer failed validation."""
        self.messages.append(Message("user", (
            f"Your answer did not pass validation: {problem}. Answer again with only the JSON object.\n\n{instruction}"
        )))
        return await self.answer()

    async def _turn(self) -> tuple[str, list[ToolCall]]:
        ctx = self.ctx
        ctx.check_cancel()
        ctx.turn += 1
        if self.steps:
            await ctx.stream("step", to_json({"iteration": ctx.turn, "prev_tools": self._prev_tools}))
        request = CompletionRequest(messages=list(self.messages), tools=self.belt.specs(), purpose="node")
        answer = await ctx.calls.complete(ctx.models.node_model_id(), ctx.models.node(), request, on_chunk=self._take)
        return answer.text, answer.tool_calls

    async def _take(self, chunk: Any) -> None:
        """Stream what the model shows while it answers; its text and tool calls are gathered by the call."""
        ctx = self.ctx
        if isinstance(chunk, ReasoningDelta):
            await ctx.stream("thinking", chunk.text)
        elif isinstance(chunk, StatusNote):
            await ctx.status(chunk.text)
        elif isinstance(chunk, TodoUpdate):
            await ctx.stream("todo_update", to_json(chunk.todos), "todo")
        elif isinstance(chunk, ToolProgress):
            progress = {"event_type": chunk.event_type, "name": chunk.name, "preview": chunk.preview}
            await ctx.stream("tool_progress", to_json(progress), chunk.name or None)
        elif isinstance(chunk, ClarifyAsk):
            raise PauseForAnswer(chunk.clarify_id, chunk.question, chunk.choices, ctx.turn)

    async def _run_tool(self, call: ToolCall) -> None:
        ctx = self.ctx
        ctx.check_cancel()
        if call.name == ASK_USER.name and self.belt.ask_user:
            raise self._question(call)
        await ctx.stream("tool_call", call.arguments, call.name)
        result = await self.belt.call(call)
        await ctx.stream("tool_result", result, call.name)
        self.messages.append(Message("tool", result, tool_call_id=call.id, name=call.name))

    def _question(self, call: ToolCall) -> PauseForAnswer:
        try:
            args = msgspec.json.decode(call.arguments or "{}")
        except msgspec.DecodeError:
            args = {}
        question = args.get("question") if isinstance(args, dict) else None
        if not isinstance(question, str) or not question.strip():
            raise VisitFailure("the model called ask_user without a question", "OUTPUT_INVALID")
        choices = [str(choice) for choice in args.get("choices") or []]
        key = f"{self.ctx.run_id}:{self.ctx.visit.visit_uuid}:{self.ctx.turn}:{call.id}"
        return PauseForAnswer(str(uuid.uuid5(CLARIFY_NAMESPACE, key)), question, choices, self.ctx.turn)
