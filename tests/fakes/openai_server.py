"""A fake OpenAI-compatible chat-completions server on 127.0.0.1 speaking the real streaming wire format."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec
import pytest_asyncio

from tests.fakes.loopback import LoopbackServer

Ending = Literal["done", "eof", "break", "hang"]
_PHRASES = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
            429: "Too Many Requests", 500: "Internal Server Error", 503: "Service Unavailable"}


@dataclass
class Reply:
    """One programmed answer: frames then an ending, or an HTTP error with a JSON body."""

    frames: Sequence[dict | str] = field(default_factory=list)
    ending: Ending = "done"
    status: int = 200
    error_body: dict | None = None
    hang_before_headers: bool = False
    usage: tuple[int, int] = (11, 7)
    headers: dict[str, str] = field(default_factory=dict)
    pace_seconds: float = 0.0
    """Pause between two frames (a model that takes its time)."""


@dataclass
class RecordedRequest:
    """What the fake received: method, path, lower-cased headers and the parsed JSON body."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


def chunk_frame(delta: dict, finish_reason: str | None = None) -> dict:
    """A `chat.completion.chunk` frame carrying one delta."""
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
    return {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1700000000,
            "model": "fake-model", "system_fingerprint": "fp_fake", "choices": [choice]}


def usage_frame(prompt_tokens: int, completion_tokens: int) -> dict:
    """The trailing frame sent when the request asked for `stream_options.include_usage`."""
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
             "total_tokens": prompt_tokens + completion_tokens}
    return {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1700000000,
            "model": "fake-model", "choices": [], "usage": usage}


def text_frames(*pieces: str, reasoning: tuple[str, ...] = ()) -> list[dict]:
    """A role frame, reasoning pieces, then content pieces (no finish frame)."""
    frames = [chunk_frame({"role": "assistant", "content": ""})]
    frames += [chunk_frame({"reasoning_content": r}) for r in reasoning]
    frames += [chunk_frame({"content": p}) for p in pieces]
    return frames


def tool_call_frames(calls: list[tuple[str, str, list[str]]]) -> list[dict]:
    """Frames for (call id, function name, argument pieces) calls, split the way OpenAI splits them."""
    frames = [chunk_frame({"role": "assistant", "content": None})]
    for index, (call_id, name, pieces) in enumerate(calls):
        head = {"index": index, "id": call_id, "type": "function",
                "function": {"name": name, "arguments": ""}}
        frames.append(chunk_frame({"tool_calls": [head]}))
        frames += [chunk_frame({"tool_calls": [{"index": index, "function": {"arguments": p}}]})
                   for p in pieces]
    return frames


class FakeOpenAI(LoopbackServer):
    """Serves `POST /v1/chat/completions`, answering each request with the next programmed Reply."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[RecordedRequest] = []
        self._replies: list[Reply] = []
        self._last = Reply(text_frames("ok") + [chunk_frame({}, "stop")])

    @property
    def base_url(self) -> str:
        """The base URL to configure a provider with (ends in /v1)."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- programming -------------------------------------------------------------------

    def will_reply(self, reply: Reply) -> None:
        """Queue a reply; when the queue runs dry the last one served is repeated (default: "ok")."""
        self._replies.append(reply)

    def will_stream_text(self, *pieces: str, reasoning: tuple[str, ...] = (), pace_seconds: float = 0.0) -> None:
        """Answer with text (and optional reasoning) pieces, finish_reason "stop", usage, [DONE]."""
        frames = text_frames(*pieces, reasoning=reasoning) + [chunk_frame({}, "stop")]
        self.will_reply(Reply(frames, pace_seconds=pace_seconds))

    def will_call_tools(self, *calls: tuple[str, str, list[str]]) -> None:
        """Answer with tool calls whose arguments arrive in pieces, finish_reason "tool_calls"."""
        self.will_reply(Reply(tool_call_frames(list(calls)) + [chunk_frame({}, "tool_calls")]))

    def will_fail(self, status: int, message: str, error_type: str = "server_error", *,
                  retry_after: str | None = None) -> None:
        """Answer with an HTTP error and an OpenAI-style JSON error body (and a `Retry-After` header if given)."""
        body = {"error": {"message": message, "type": error_type, "param": None, "code": None}}
        headers = {"Retry-After": retry_after} if retry_after is not None else {}
        self.will_reply(Reply(status=status, error_body=body, headers=headers))

    def will_break_after(self, *pieces: str) -> None:
        """Send text pieces, then drop the connection mid-body (no [DONE], no finish)."""
        self.will_reply(Reply(text_frames(*pieces), ending="break"))

    def will_end_without_done(self, *pieces: str) -> None:
        """Send text pieces and end the body cleanly, but with no finish_reason and no [DONE]."""
        self.will_reply(Reply(text_frames(*pieces), ending="eof"))

    def will_hang_after(self, *pieces: str) -> None:
        """Send text pieces, then keep the connection open and silent."""
        self.will_reply(Reply(text_frames(*pieces), ending="hang"))

    def will_hang_before_headers(self) -> None:
        """Accept the request and never answer."""
        self.will_reply(Reply(hang_before_headers=True))

    def will_send_garbage_after(self, *pieces: str) -> None:
        """Send text pieces, then a frame that is not JSON."""
        self.will_reply(Reply(text_frames(*pieces) + ["{not json at all"]))

    # -- serving -----------------------------------------------------------------------


    def _next_reply(self) -> Reply:
        if self._replies:
            self._last = self._replies.pop(0)
        return self._last

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Record the request and answer it with the next reply."""
        request = await _read_request(reader)
        self.requests.append(request)
        if request.method != "POST" or request.path != "/v1/chat/completions":
            await _send_json(writer, 404, {"error": {"message": f"no route {request.path}"}})
            return
        await self._answer(writer, self._next_reply(), request.body)

    async def _answer(self, writer: asyncio.StreamWriter, reply: Reply, body: Any) -> None:
        if reply.hang_before_headers:
            await self.hang()
            return
        if reply.status != 200:
            await _send_json(writer, reply.status, reply.error_body or {}, reply.headers)
            return
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     b"Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n"
                     b"Connection: close\r\n\r\n")
        frames = list(reply.frames)
        wants_usage = isinstance(body, dict) and (body.get("stream_options") or {}).get("include_usage")
        if reply.ending == "done" and wants_usage:
            frames.append(usage_frame(*reply.usage))
        for frame in frames:
            await _send_event(writer, frame)
            if reply.pace_seconds:
                await asyncio.sleep(reply.pace_seconds)
        if reply.ending == "done":
            await _send_event(writer, "[DONE]")
        elif reply.ending == "break":
            writer.transport.abort()
            return
        elif reply.ending == "hang":
            await self.hang()
            return
        writer.write(b"0\r\n\r\n")
        await writer.drain()


async def _read_request(reader: asyncio.StreamReader) -> RecordedRequest:
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
    request_line, *lines = head.split("\r\n")
    method, path, _ = request_line.split(" ", 2)
    headers = {}
    for line in lines:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    raw = await reader.readexactly(int(headers.get("content-length", "0")))
    body = msgspec.json.decode(raw) if raw else None
    return RecordedRequest(method, path, headers, body)


async def _send_event(writer: asyncio.StreamWriter, frame: dict | str) -> None:
    data = frame if isinstance(frame, str) else msgspec.json.encode(frame).decode()
    event = f"data: {data}\n\n".encode()
    writer.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
    await writer.drain()


async def _send_json(writer: asyncio.StreamWriter, status: int, body: dict,
                     headers: dict[str, str] | None = None) -> None:
    payload = msgspec.json.encode(body)
    extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
    head = (f"HTTP/1.1 {status} {_PHRASES.get(status, 'Error')}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n{extra}"
            "Connection: close\r\n\r\n")
    writer.write(head.encode() + payload)
    await writer.drain()


@pytest_asyncio.fixture
async def fake_openai():
    """A started FakeOpenAI, stopped after the test."""
    server = FakeOpenAI()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
