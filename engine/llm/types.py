"""Messages, requests, stream chunks, errors and the provider protocol shared by all LLM providers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Literal, Protocol

import msgspec

Role = Literal["system", "user", "assistant", "tool"]


class ToolCall(msgspec.Struct, frozen=True):
    """A complete function call the model asked for; `arguments` is the raw JSON text."""

    id: str
    name: str
    arguments: str


class Message(msgspec.Struct, omit_defaults=True):
    """One chat message in OpenAI's shape."""

    role: Role
    content: str | None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None


class ToolSpec(msgspec.Struct, frozen=True):
    """A function the model may call, with its JSON-schema parameters."""

    name: str
    description: str
    parameters: dict


class CompletionRequest(msgspec.Struct):
    """What to ask a model; `purpose` is "node", "reformat" or "planner"."""

    messages: list[Message]
    tools: list[ToolSpec] = []
    model: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    response_format_json: bool = False
    purpose: str = "node"


# ---- stream chunks (a tagged union) -------------------------------------------------


class TextDelta(msgspec.Struct, frozen=True, tag="text"):
    """A piece of the answer text."""

    text: str


class ReasoningDelta(msgspec.Struct, frozen=True, tag="reasoning"):
    """A piece of the model's thinking."""

    text: str


class ToolCallReady(msgspec.Struct, frozen=True, tag="tool_call"):
    """A tool call whose fragments have all arrived."""

    call: ToolCall


class Usage(msgspec.Struct, frozen=True, tag="usage"):
    """Token counts for the whole call."""

    prompt_tokens: int = 0
    completion_tokens: int = 0


class Finished(msgspec.Struct, frozen=True, tag="finished"):
    """The last chunk of a stream."""

    finish_reason: str | None


class StatusNote(msgspec.Struct, frozen=True, tag="status"):
    """A status line for the node log (scripted provider only)."""

    text: str


class TodoUpdate(msgspec.Struct, frozen=True, tag="todo"):
    """The node's current TODO list (scripted provider only)."""

    todos: list[dict]


class ClarifyAsk(msgspec.Struct, frozen=True, tag="clarify"):
    """A question that pauses the run until answered (scripted provider only)."""

    clarify_id: str
    question: str
    choices: list[str] = []


class ToolProgress(msgspec.Struct, frozen=True, tag="tool_progress"):
    """Progress of a running tool (scripted provider only)."""

    name: str
    event_type: str
    preview: str = ""


Chunk = (
    TextDelta
    | ReasoningDelta
    | ToolCallReady
    | Usage
    | Finished
    | StatusNote
    | TodoUpdate
    | ClarifyAsk
    | ToolProgress
)


class Completion(msgspec.Struct):
    """A whole answer, gathered from a stream."""

    text: str
    tool_calls: list[ToolCall]
    usage: Usage | None
    finish_reason: str | None
    reasoning: str = ""


async def collect(stream: AsyncIterator[Chunk]) -> Completion:
    """Gather a chunk stream into a Completion (scripted-only extras are dropped)."""
    text: list[str] = []
    reasoning: list[str] = []
    calls: list[ToolCall] = []
    usage: Usage | None = None
    finish_reason: str | None = None
    async for chunk in stream:
        if isinstance(chunk, TextDelta):
            text.append(chunk.text)
        elif isinstance(chunk, ReasoningDelta):
            reasoning.append(chunk.text)
        elif isinstance(chunk, ToolCallReady):
            calls.append(chunk.call)
        elif isinstance(chunk, Usage):
            usage = chunk
        elif isinstance(chunk, Finished):
            finish_reason = chunk.finish_reason
    return Completion("".join(text), calls, usage, finish_reason, "".join(reasoning))


class LlmProvider(Protocol):
    """Anything that streams chunks for a CompletionRequest."""

    def stream(
        self, request: CompletionRequest, *, cancel: asyncio.Event | None = None
    ) -> AsyncGenerator[Chunk, None]:
        """Stream the answer chunk by chunk; raises LlmError subclasses."""
        ...

    async def complete(
        self, request: CompletionRequest, *, cancel: asyncio.Event | None = None
    ) -> Completion:
        """Return the whole answer (the stream, collected)."""
        ...


class CollectingProvider:
    """Gives a streaming provider `complete()`: its own stream, collected."""

    def stream(
        self, request: CompletionRequest, *, cancel: asyncio.Event | None = None
    ) -> AsyncGenerator[Chunk, None]:
        """Implemented by each provider."""
        raise NotImplementedError

    async def complete(
        self, request: CompletionRequest, *, cancel: asyncio.Event | None = None
    ) -> Completion:
        """Return the whole answer (the stream, collected)."""
        return await collect(self.stream(request, cancel=cancel))


# ---- errors ------------------------------------------------------------------------


class LlmError(Exception):
    """Base of every provider failure; messages never carry secrets.

    `code` names the kind of failure (recorded with the failed call); `retryable` says whether
    the same request may succeed if sent again; `retry_after` is the wait the endpoint asked for.
    """

    retryable: bool = False
    code: str = "MODEL_ERROR"
    retry_after: float | None = None


class LlmTimeout(LlmError):
    """The endpoint did not answer, or stopped answering, in time."""

    retryable = True
    code = "TIMEOUT"


class LlmStreamBroken(LlmError):
    """The stream ended early or carried a malformed frame."""

    retryable = True
    code = "STREAM_BROKEN"


class LlmUnreachable(LlmError):
    """The endpoint could not be connected to (refused, reset, name not resolved)."""

    retryable = True
    code = "CONNECTION"


class LlmCancelled(LlmError):
    """The caller's cancel event was set while streaming."""

    code = "CANCELLED"


class LlmRetriesExhausted(LlmError):
    """A retryable failure happened again and no retry was left (or the endpoint asked for too long a wait)."""

    code = "RETRIES_EXHAUSTED"

    def __init__(self, message: str, last: LlmError, *, attempts: int, why: str) -> None:
        super().__init__(message)
        self.last = last
        self.attempts = attempts
        self.why = why


_STATUS_PHRASES = {
    400: "bad request",
    401: "unauthorized (check the API key)",
    403: "forbidden",
    404: "not found (check base_url and model)",
    408: "request timeout",
    409: "conflict",
    413: "request too large",
    422: "unprocessable request",
    429: "rate limited",
    500: "server error",
    502: "bad gateway",
    503: "service unavailable",
    504: "gateway timeout",
}


class LlmHttpError(LlmError):
    """The endpoint answered with a non-2xx status."""

    def __init__(self, status: int, body_excerpt: str = "", *, retry_after: float | None = None) -> None:
        self.status = status
        self.body_excerpt = body_excerpt
        self.retry_after = retry_after
        self.code = f"HTTP_{status}"
        """`HTTP_` and the status, e.g. `HTTP_429`."""
        self.retryable = status >= 500 or status in (408, 429)
        """Server errors, 408 and 429 are worth retrying; other client errors are not."""
        phrase = _STATUS_PHRASES.get(status, "client error" if status < 500 else "server error")
        message = f"model endpoint answered {status}: {phrase}"
        if body_excerpt:
            message += f" - {body_excerpt}"
        super().__init__(message)

    @property
    def is_client_error(self) -> bool:
        """True for 4xx answers."""
        return 400 <= self.status < 500

    @property
    def is_server_error(self) -> bool:
        """True for 5xx answers."""
        return self.status >= 500
