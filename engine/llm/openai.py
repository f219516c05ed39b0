"""An OpenAI-compatible Chat Completions provider: streaming over httpx, tool calls, clear errors."""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

import httpx
import msgspec

from domain.urls import shown_url
from engine.llm.config import ModelConfig
from engine.llm.types import (
    Chunk,
    CollectingProvider,
    CompletionRequest,
    Finished,
    LlmCancelled,
    LlmError,
    LlmHttpError,
    LlmStreamBroken,
    LlmTimeout,
    LlmUnreachable,
    Message,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    ToolCallReady,
    Usage,
)

T = TypeVar("T")
_EXCERPT_CHARS = 300


class OpenAIProvider(CollectingProvider):
    """Streams chat completions from `{base_url}/chat/completions`; one httpx client per instance."""

    def __init__(
        self, config: ModelConfig, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.config = config
        self._url = config.base_url.rstrip("/") + "/chat/completions"
        limit = config.timeout_seconds
        timeout = httpx.Timeout(connect=min(limit, 10.0), read=limit, write=limit, pool=limit)
        self._client = httpx.AsyncClient(timeout=timeout, transport=transport)

    def __repr__(self) -> str:
        c = self.config
        return f"OpenAIProvider(id={c.id!r}, model={c.model!r}, base_url={shown_url(c.base_url)!r})"

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._client.aclose()

    async def stream(
        self, request: CompletionRequest, *, cancel: asyncio.Event | None = None
    ) -> AsyncGenerator[Chunk, None]:
        """Stream text, reasoning, assembled tool calls, usage and a final Finished chunk."""
        key = self._api_key()
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        body = msgspec.json.encode(request_body(request, self.config.model))
        http_request = self._client.build_request("POST", self._url, content=body, headers=headers)
        guard = _Guard(cancel, self.config)
        deadline: float | None = asyncio.get_running_loop().time() + self.config.first_token_timeout
        response: httpx.Response | None = None
        frames: AsyncGenerator[str, None] | None = None
        try:
            response = await guard.run(self._client.send(http_request, stream=True), deadline)
            if not response.is_success:
                excerpt = await guard.run(_read_excerpt(response), deadline)
                retry_after = parse_retry_after(response.headers.get("retry-after"))
                raise LlmHttpError(response.status_code, scrub(excerpt, key), retry_after=retry_after)
            if response.headers.get("content-type", "").startswith("application/json"):
                raise LlmStreamBroken("model endpoint answered plain JSON, not an event stream")
            frames = sse_data(response.aiter_lines())
            assembler = FrameAssembler(secret=key)
            while True:
                try:
                    data = await guard.run(anext(frames, None), deadline)
                except LlmStreamBroken:
                    if assembler.finish_reason is None:
                        raise
                    break  # the answer was complete; only the [DONE] trailer was lost
                if data is None or data == "[DONE]":
                    assembler.done = data is not None
                    break
                for chunk in assembler.feed(data):
                    deadline = None  # the first token arrived
                    guard.check()
                    yield chunk
            for chunk in assembler.finish():
                yield chunk
        finally:
            guard.close()
            if frames is not None:
                await frames.aclose()
            if response is not None:
                await response.aclose()

    def _api_key(self) -> str | None:
        env = self.config.api_key_env
        if not env:
            return None
        key = os.environ.get(env)
        if not key:
            raise LlmError(f"model {self.config.id!r}: environment variable {env} is not set")
        return key


class _Guard:
    """Runs network awaits under a deadline and turns a set cancel event into LlmCancelled."""

    def __init__(self, cancel: asyncio.Event | None, config: ModelConfig) -> None:
        self._cancel = cancel
        self._config = config
        self._task: asyncio.Task | None = None
        self._waiting = False
        self._fired = False
        self._watcher: asyncio.Task | None = None
        if cancel is not None:
            self._watcher = asyncio.ensure_future(cancel.wait())
            self._watcher.add_done_callback(self._on_cancel)

    def _on_cancel(self, watcher: asyncio.Future) -> None:
        if not watcher.cancelled() and self._waiting and self._task is not None:
            self._fired = True
            self._task.cancel()

    def check(self) -> None:
        """Raise LlmCancelled if the cancel event is set."""
        if self._cancel is not None and self._cancel.is_set():
            raise LlmCancelled("cancelled while streaming from the model endpoint")

    def close(self) -> None:
        """Stop watching the cancel event."""
        if self._watcher is not None:
            self._watcher.cancel()

    async def run(self, awaitable: Awaitable[T], deadline: float | None) -> T:
        """Await `awaitable`, translating timeouts, transport errors and cancellation."""
        try:
            self.check()
        except LlmCancelled:
            if asyncio.iscoroutine(awaitable):
                awaitable.close()
            raise
        self._task, self._waiting = asyncio.current_task(), True
        try:
            async with asyncio.timeout_at(deadline):
                result = await awaitable
        except asyncio.CancelledError:
            if self._fired and self._task is not None:
                self._fired = False
                self._task.uncancel()
                raise LlmCancelled("cancelled while streaming from the model endpoint") from None
            raise
        except TimeoutError:
            raise LlmTimeout(
                f"model {self._config.id!r} sent no first token within "
                f"{self._config.first_token_timeout:g}s"
            ) from None
        except httpx.TimeoutException as exc:
            raise LlmTimeout(
                f"model {self._config.id!r} timed out ({type(exc).__name__}) after "
                f"{self._config.timeout_seconds:g}s"
            ) from None
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            raise LlmStreamBroken(
                f"model {self._config.id!r} closed the stream early ({type(exc).__name__})"
            ) from None
        except httpx.TransportError as exc:
            raise LlmUnreachable(
                f"could not reach model {self._config.id!r} at "
                f"{shown_url(self._config.base_url)} ({type(exc).__name__})"
            ) from None
        finally:
            self._waiting = False
        if self._fired:  # the cancellation was swallowed below us: still honour it
            self._fired = False
            if self._task is not None:
                self._task.uncancel()
            raise LlmCancelled("cancelled while streaming from the model endpoint")
        return result


# ---- wire format ---------------------------------------------------------------------


def request_body(request: CompletionRequest, default_model: str) -> dict[str, Any]:
    """The JSON body of a streaming chat-completions request."""
    body: dict[str, Any] = {
        "model": request.model or default_model,
        "messages": [_wire_message(m) for m in request.messages],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        body["tools"] = [
            {"type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": t.parameters}}
            for t in request.tools
        ]
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.max_tokens is not None:
        body["max_tokens"] = request.max_tokens
    if request.response_format_json:
        body["response_format"] = {"type": "json_object"}
    return body


def _wire_message(m: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in m.tool_calls
        ]
    if m.tool_call_id is not None:
        out["tool_call_id"] = m.tool_call_id
    if m.name is not None:
        out["name"] = m.name
    return out


async def sse_data(lines: AsyncIterator[str]) -> AsyncGenerator[str, None]:
    """Yield the data of each Server-Sent Event (comments and other fields are skipped)."""
    data: list[str] = []
    async for raw in lines:
        line = raw.rstrip("\r\n")
        if not line:
            if data:
                yield "\n".join(data)
                data = []
            continue
        field, _, value = line.partition(":")
        if field == "data":
            data.append(value[1:] if value.startswith(" ") else value)
    if data:
        yield "\n".join(data)


class _PendingCall:
    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.arguments: list[str] = []


class FrameAssembler:
    """Turns chat.completion.chunk frames into chunks, assembling tool-call fragments per index."""

    def __init__(self, secret: str | None = None) -> None:
        self._secret = secret
        self.calls: dict[int, _PendingCall] = {}
        self.finish_reason: str | None = None
        self.done = False

    def feed(self, data: str) -> list[Chunk]:
        """Chunks carried by one frame; raises LlmStreamBroken on a malformed frame."""
        try:
            frame = msgspec.json.decode(data)
            return self._chunks(frame)
        except (msgspec.DecodeError, AttributeError, TypeError, KeyError, ValueError):
            excerpt = scrub(data[:80], self._secret)
            raise LlmStreamBroken(f"malformed frame from model endpoint: {excerpt!r}") from None

    def finish(self) -> list[Chunk]:
        """The trailing chunks once the stream has ended; raises LlmStreamBroken if it ended early."""
        if not self.done and self.finish_reason is None:
            raise LlmStreamBroken("model stream ended without [DONE] or a finish_reason")
        return [*self._ready_calls(), Finished(self.finish_reason)]

    def _chunks(self, frame: dict[str, Any]) -> list[Chunk]:
        if frame.get("error"):
            raise _frame_error(frame["error"], self._secret)
        out: list[Chunk] = []
        choices = frame.get("choices") or []
        if choices:
            choice = choices[0]
            delta = choice.get("delta") or {}
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if reasoning:
                out.append(ReasoningDelta(reasoning))
            if delta.get("content"):
                out.append(TextDelta(delta["content"]))
            for fragment in delta.get("tool_calls") or []:
                self._add_fragment(fragment)
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
                out.extend(self._ready_calls())
        usage = frame.get("usage")
        if usage:
            out.append(Usage(usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0))
        return out

    def _add_fragment(self, fragment: dict[str, Any]) -> None:
        index = fragment.get("index")
        if index is None:  # some servers omit the index: a new id starts a new call
            new = fragment.get("id") and all(p.id != fragment["id"] for p in self.calls.values())
            index = len(self.calls) if new or not self.calls else max(self.calls)
        pending = self.calls.setdefault(int(index), _PendingCall())
        pending.id = pending.id or fragment.get("id") or ""
        function = fragment.get("function") or {}
        pending.name = pending.name or function.get("name") or ""
        if function.get("arguments"):
            pending.arguments.append(function["arguments"])

    def _ready_calls(self) -> list[Chunk]:
        ready: list[Chunk] = []
        for index in sorted(self.calls):
            pending = self.calls.pop(index)
            if not pending.name:
                raise LlmStreamBroken(f"tool call #{index} arrived without a function name")
            arguments = "".join(pending.arguments) or "{}"
            ready.append(ToolCallReady(ToolCall(pending.id or f"call_{index}", pending.name, arguments)))
        return ready


def _frame_error(error: Any, secret: str | None) -> LlmError:
    message = error.get("message", "") if isinstance(error, dict) else str(error)
    code = error.get("code") if isinstance(error, dict) else None
    status = code if isinstance(code, int) and 400 <= code < 600 else 502
    return LlmHttpError(status, scrub(_squash(str(message)), secret))


# ---- error excerpts without secrets -----------------------------------------------------


async def _read_excerpt(response: httpx.Response) -> str:
    body = b""
    async for part in response.aiter_bytes():
        body += part
        if len(body) > 4096:
            break
    try:
        parsed = msgspec.json.decode(body)
        error = parsed.get("error") if isinstance(parsed, dict) else None
        if isinstance(error, dict) and error.get("message"):
            return _squash(str(error["message"]))
        if isinstance(error, str):
            return _squash(error)
    except (msgspec.DecodeError, AttributeError):
        pass
    return _squash(body.decode("utf-8", "replace"))


def _squash(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _EXCERPT_CHARS else text[: _EXCERPT_CHARS - 3] + "..."


_SECRET_PATTERNS = [
    (re.compile(r"\bsk-[A-Za-z0-9_\-*.]{4,}"), "sk-***"),
    (re.compile(r"(?i)\bbearer\s+\S+"), "Bearer ***"),
]


def scrub(text: str, key: str | None) -> str:
    """Remove the API key (and anything that looks like one) from text."""
    if key:
        text = text.replace(key, "***")
    for pattern, replacement in _SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a `Retry-After` header: delta-seconds or an HTTP date; None if absent or unreadable."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
