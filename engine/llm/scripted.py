"""A deterministic, network-free provider that plays a script of turns (for the demo and tests)."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncGenerator, Callable
from typing import Any, NamedTuple

import msgspec

from engine.llm.types import (
    Chunk,
    ClarifyAsk,
    CollectingProvider,
    CompletionRequest,
    Finished,
    LlmCancelled,
    LlmHttpError,
    LlmStreamBroken,
    ReasoningDelta,
    StatusNote,
    TextDelta,
    TodoUpdate,
    ToolCall,
    ToolCallReady,
    ToolProgress,
    Usage,
)
from engine.waiting import wait_event

Step = dict[str, Any]
Turn = list[Step]
ParsedScript = dict[str, list[Turn]]
"""A script as parse_script leaves it: each purpose's turns ("node" for the node's own)."""

STEP_KINDS = frozenset(
    {"thinking", "text", "tool_call", "status", "todo", "clarify", "tool_progress",
     "sleep", "fail", "hang", "break"}
)
PURPOSES = ("reformat", "planner")
DEFAULT_SCRIPT: list[Turn] = [[{"text": "Done."}]]
_REQUIRED_FIELDS = {"tool_call": "name", "clarify": "question"}
_CLARIFY_NAMESPACE = uuid.UUID("6f1d3b7e-2c4a-4e0b-9a53-5c1f0d2e8a71")
_WORD_PIECES = re.compile(r"\s*\S+\s*")


def split_words(text: str) -> list[str]:
    """Split text into word-sized pieces whose concatenation is the text."""
    return _WORD_PIECES.findall(text) or ([text] if text else [])


def parse_script(script: Any) -> ParsedScript:
    """Normalise a script (turns, a single turn, or a dict keyed by purpose); raise ValueError if bad."""
    if isinstance(script, dict):
        unknown = set(script) - {"turns", *PURPOSES}
        if unknown:
            raise ValueError(f"script has unknown keys: {sorted(unknown)}")
        parsed = {"node": _parse_turns(script.get("turns", []), "turns")}
        for purpose in PURPOSES:
            if purpose in script:
                parsed[purpose] = _parse_turns(script[purpose], purpose)
        return parsed
    return {"node": _parse_turns(script, "script")}


def _parse_turns(turns: Any, where: str) -> list[Turn]:
    if not isinstance(turns, list):
        raise ValueError(f"{where}: expected a list of turns")
    if not turns:
        return [[]]
    if all(isinstance(step, dict) for step in turns):
        turns = [turns]  # a single turn written as a flat list of steps
    for t, turn in enumerate(turns):
        if not isinstance(turn, list):
            raise ValueError(f"{where}[{t}]: a turn is a list of steps")
        for s, step in enumerate(turn):
            if not isinstance(step, dict) or len(step) != 1 or next(iter(step)) not in STEP_KINDS:
                raise ValueError(
                    f"{where}[{t}][{s}]: a step is a one-key object, one of {sorted(STEP_KINDS)}"
                )
            kind, value = next(iter(step.items()))
            needed = _REQUIRED_FIELDS.get(kind)
            if needed and not (isinstance(value, dict) and needed in value):
                raise ValueError(f"{where}[{t}][{s}]: a {kind} step needs an object with {needed!r}")
    return turns


class ScriptedProvider(CollectingProvider):
    """Plays the next turn of the script on each `stream()` call; repeats the last turn when done.

    Each purpose ("node", "reformat", "planner") keeps its own cursor; a purpose without its
    own turns plays the node turns. Its usage is an estimate: prompt tokens are the words of
    the request's messages, completion tokens the word-sized pieces it streamed.
    """

    def __init__(
        self, script: Any = None, *, pace_seconds: float = 0.0, seed: str = "scripted",
        parsed: ParsedScript | None = None,
    ) -> None:
        self._turns = parsed if parsed is not None else parse_script(DEFAULT_SCRIPT if script is None else script)
        self.pace_seconds = pace_seconds
        self.seed = seed
        self._calls: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"ScriptedProvider(purposes={sorted(self._turns)}, pace_seconds={self.pace_seconds})"

    def reset(self) -> None:
        """Start every purpose's script from its first turn again."""
        self._calls.clear()

    def _next_turn(self, purpose: str) -> tuple[int, Turn]:
        index = self._calls.get(purpose, 0)
        self._calls[purpose] = index + 1
        turns = self._turns.get(purpose) or self._turns["node"]
        return index + 1, turns[min(index, len(turns) - 1)]

    async def stream(
        self, request: CompletionRequest, *, cancel: asyncio.Event | None = None
    ) -> AsyncGenerator[Chunk, None]:
        """Stream the next turn for `request.purpose`, then Usage and Finished."""
        number, turn = self._next_turn(request.purpose)
        prefix = "" if request.purpose == "node" else f"{request.purpose}_"
        made_calls = False
        pieces = 0
        for n, step in enumerate(turn, start=1):
            kind, value = next(iter(step.items()))
            if kind in ("sleep", "hang"):
                await _wait(cancel, float(value) if kind == "sleep" else None)
                continue
            if kind == "fail":
                raise LlmHttpError(500, str(value))
            if kind == "break":
                raise LlmStreamBroken("scripted stream broke mid-turn")
            ids = _Ids(f"call_{prefix}{number}_{n}", f"{self.seed}/{request.purpose}/{number}/{n}")
            for chunk in _BUILDERS[kind](value, ids):
                _check(cancel)
                made_calls = made_calls or isinstance(chunk, ToolCallReady)
                pieces += isinstance(chunk, (TextDelta, ReasoningDelta))
                yield chunk
                if self.pace_seconds:
                    await _pause(cancel, self.pace_seconds)
        _check(cancel)
        prompt = sum(len((m.content or "").split()) for m in request.messages)
        yield Usage(prompt_tokens=prompt, completion_tokens=pieces)
        yield Finished("tool_calls" if made_calls else "stop")


class _Ids(NamedTuple):
    call_id: str  # deterministic tool-call id for this step
    clarify_key: str  # hashed with the seed into a deterministic clarify id


def _tool_call(value: dict, ids: _Ids) -> list[Chunk]:
    arguments = value.get("arguments", {})
    if not isinstance(arguments, str):
        arguments = msgspec.json.encode(arguments).decode()
    call = ToolCall(id=value.get("id", ids.call_id), name=value["name"], arguments=arguments)
    return [ToolCallReady(call)]


def _clarify(value: dict, ids: _Ids) -> list[Chunk]:
    clarify_id = value.get("id") or str(uuid.uuid5(_CLARIFY_NAMESPACE, ids.clarify_key))
    return [ClarifyAsk(clarify_id, value["question"], list(value.get("choices", [])))]


def _progress(value: dict, ids: _Ids) -> list[Chunk]:
    event_type = value.get("event_type", value.get("type", "progress"))
    return [ToolProgress(value.get("name", ""), event_type, str(value.get("preview", "")))]


def as_answer_text(value: Any) -> str:
    """A `text` step's words: a string as it is; an object or array as its JSON text (values escaped)."""
    if isinstance(value, dict | list):
        return msgspec.json.encode(value).decode()
    return str(value)


_BUILDERS: dict[str, Callable[[Any, _Ids], list[Chunk]]] = {
    "thinking": lambda v, _: [ReasoningDelta(p) for p in split_words(str(v))],
    "text": lambda v, _: [TextDelta(p) for p in split_words(as_answer_text(v))],
    "status": lambda v, _: [StatusNote(str(v))],
    "todo": lambda v, _: [TodoUpdate(list(v))],
    "tool_call": _tool_call,
    "clarify": _clarify,
    "tool_progress": _progress,
}


SHORT_PAUSE_SECONDS = 0.25


def _check(cancel: asyncio.Event | None) -> None:
    if cancel is not None and cancel.is_set():
        raise LlmCancelled("cancelled while streaming")


async def _pause(cancel: asyncio.Event | None, seconds: float) -> None:
    """The pace between two chunks: a plain sleep, then LlmCancelled if `cancel` was set meanwhile.

    Waiting on `cancel` with a time limit costs a timer, a waiter and a cancellation that is raised and
    caught at every chunk (the most expensive thing a paced script did per chunk). A pace up to
    `SHORT_PAUSE_SECONDS` is such a sleep (a cancellation is noticed within it); a longer one waits on `cancel`.
    """
    if seconds > SHORT_PAUSE_SECONDS:
        await _wait(cancel, seconds)
        return
    await asyncio.sleep(seconds)
    _check(cancel)


async def _wait(cancel: asyncio.Event | None, seconds: float | None) -> None:
    """Sleep `seconds` (forever if None), waking early with LlmCancelled if `cancel` is set.

    Zero seconds (a `sleep 0` step) only lets the other tasks run: a bare `asyncio.sleep(0)`,
    no timer and no waiter on `cancel`.
    """
    _check(cancel)
    if seconds == 0:
        await asyncio.sleep(0)
        return
    if cancel is None:
        await (asyncio.sleep(seconds) if seconds is not None else asyncio.Event().wait())
        return
    if not await wait_event(cancel, seconds):
        return
    raise LlmCancelled("cancelled while streaming")
