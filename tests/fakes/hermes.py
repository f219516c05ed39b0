"""The model behind a real Hermes gateway in tests: FakeOpenAI plus `GET /v1/models` and non-streaming answers.

The gateway streams its agent turns (programmed with `will_*`, one reply per streaming call)
and makes one non-streaming call of its own (a session title): that one is always answered
with a short text and never consumes a programmed reply.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from engine.hermes.probe import REQUIRED_FEATURES
from tests.fakes.loopback import LoopbackServer
from tests.fakes.openai_server import (
    FakeOpenAI,
    Reply,
    _read_request,
    _send_event,
    _send_json,
    chunk_frame,
    text_frames,
    usage_frame,
)

MODEL = "fake-model"


@dataclass
class GatedReply(Reply):
    """Text pieces, then a wait until the test opens the gate, then the rest of the answer (and its end)."""

    rest: Sequence[str] = ()


class FakeGatewayModel(FakeOpenAI):
    """Serves the gateway's model calls on 127.0.0.1; `streamed` keeps the bodies of its streaming calls."""

    def __init__(self) -> None:
        super().__init__()
        self.streamed: list[dict] = []
        self.gate = asyncio.Event()

    def reset(self) -> None:
        """Forget programmed replies and recorded requests; close the gate."""
        self.requests.clear()
        self.streamed.clear()
        self._replies.clear()
        self.gate = asyncio.Event()

    def will_pause_between(self, before: Sequence[str], after: Sequence[str]) -> None:
        """Answer the next turn with `before`, wait until `open_gate`, then `after` and the answer's end."""
        self.will_reply(GatedReply(text_frames(*before), rest=after))

    def open_gate(self) -> None:
        """Let paused answers go on."""
        self.gate.set()

    async def _answer(self, writer: asyncio.StreamWriter, reply: Reply, body: Any) -> None:
        if not isinstance(reply, GatedReply):
            await super()._answer(writer, reply, body)
            return
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                     b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
        for frame in reply.frames:
            await _send_event(writer, frame)
        await self.gate.wait()
        for frame in [chunk_frame({"content": piece}) for piece in reply.rest] + [chunk_frame({}, "stop")]:
            await _send_event(writer, frame)
        if isinstance(body, dict) and (body.get("stream_options") or {}).get("include_usage"):
            await _send_event(writer, usage_frame(*reply.usage))
        await _send_event(writer, "[DONE]")
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    def release_hangs(self) -> None:
        """End every hanging reply now (the connection closes) and open the gate; later hangs hang again."""
        self.gate.set()
        self._release.set()
        self._release = asyncio.Event()

    def will_run_command(self, command: str, call_id: str = "call_cmd") -> None:
        """Answer the next turn with a call of the gateway's `terminal` tool."""
        self.will_call_tools((call_id, "terminal", [json.dumps({"command": command})]))

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Answer models listings, non-streaming calls, and streaming calls with the next reply."""
        request = await _read_request(reader)
        self.requests.append(request)
        if request.method == "GET" and request.path.startswith("/v1/models"):
            await _send_json(writer, 200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
            return
        if request.method != "POST" or request.path != "/v1/chat/completions":
            await _send_json(writer, 404, {"error": {"message": f"no route {request.path}"}})
            return
        body = request.body if isinstance(request.body, dict) else {}
        if not body.get("stream"):
            await _send_json(writer, 200, _completion("Flowtrail test session"))
            return
        self.streamed.append(body)
        await self._answer(writer, self._next_reply(), body)


def _completion(text: str) -> dict:
    message = {"role": "assistant", "content": text}
    return {"id": "chatcmpl-fake", "object": "chat.completion", "created": 1700000000, "model": MODEL,
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}


class IncompatibleGateway(LoopbackServer):
    """A gateway that answers its capabilities without `run_stop` (an older or trimmed-down server)."""

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Answer every request with the trimmed capabilities."""
        await _read_request(reader)
        features = {name: True for name in ("run_submission", "run_events_sse", "run_approval_response",
                                            "session_resources")}
        await _send_json(writer, 200, {"object": "hermes.api_server.capabilities", "features": features})


_STATUS_READ = re.compile(rb"GET /v1/runs/run_[0-9a-f]+ HTTP/1.1")
StopRefusal = Literal["fail", "swallow"]
"""How a proxy keeps a stop request from the gateway: answer 502 (a stop that fails), or answer `stopping` itself
(a stop the gateway never hears of, so it never confirms it)."""


class GatewayProxy(LoopbackServer):
    """A TCP proxy in front of a gateway that logs every request line that goes through (`requests`), so a test
    can count submissions; `cut_stream` drops the client's connection right after the first event of the first run's stream;
    `refuse_stop` keeps stop requests from the gateway."""

    def __init__(self, upstream_port: int, *, cut_stream: bool = False, refuse_stop: StopRefusal | None = None,
                 failed_status_reads: int = 0) -> None:
        super().__init__()
        self.upstream_port = upstream_port
        self.cut_stream = cut_stream
        self.refuse_stop = refuse_stop
        self.failed_status_reads = failed_status_reads
        """How many reads of a run's status (`GET /v1/runs/{id}`) to answer 503 before letting them through."""
        self.requests: list[str] = []
        self.cuts = 0

    def submissions(self) -> list[str]:
        """The `POST /v1/runs` requests that went through."""
        return [line for line in self.requests if line.startswith("POST /v1/runs ")]

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Pipe bytes both ways, logging request lines (and cutting an events stream when asked)."""
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        streaming = asyncio.Event()

        async def to_gateway() -> None:
            while data := await reader.read(65536):
                self.requests += [line for line in data.decode("latin-1").split("\r\n") if " HTTP/1.1" in line]
                if self.refuse_stop is not None and b"/stop HTTP/1.1" in data:
                    await self._refuse(writer)
                    return
                if self.failed_status_reads > 0 and _STATUS_READ.match(data):
                    self.failed_status_reads -= 1
                    await _send_json(writer, 503, {"error": {"code": "unavailable", "message": "the proxy failed it"}})
                    return
                if b"/events HTTP/1.1" in data:
                    streaming.set()
                up_writer.write(data)
                await up_writer.drain()

        async def to_client() -> None:
            while data := await up_reader.read(65536):
                writer.write(data)
                await writer.drain()
                if self.cut_stream and not self.cuts and streaming.is_set() and b"data: " in data:
                    self.cuts += 1
                    writer.transport.abort()
                    return

        try:
            await asyncio.wait([asyncio.ensure_future(to_gateway()), asyncio.ensure_future(to_client())],
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            up_writer.close()

    async def _refuse(self, writer: asyncio.StreamWriter) -> None:
        if self.refuse_stop == "fail":
            await _send_json(writer, 502, {"error": {"code": "bad_gateway", "message": "the proxy refused"}})
        else:
            await _send_json(writer, 200, {"status": "stopping"})


class EndingGateway(LoopbackServer):
    """A gateway whose run event stream ends cleanly after one delta, with no terminal event."""

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Capabilities, no sessions, one accepted run, and its truncated stream."""
        request = await _read_request(reader)
        if request.path == "/v1/capabilities":
            features = {name: True for name in REQUIRED_FEATURES}
            await _send_json(writer, 200, {"object": "hermes.api_server.capabilities", "features": features})
        elif request.path.startswith("/api/sessions/"):
            await _send_json(writer, 404, {"error": {"code": "session_not_found", "message": "Session not found"}})
        elif request.method == "POST" and request.path == "/v1/runs":
            await _send_json(writer, 202, {"run_id": "run_" + "0" * 32, "status": "started"})
        elif request.path.endswith("/events"):
            frame = json.dumps({"event": "message.delta", "run_id": "run_" + "0" * 32, "delta": "Hal"})
            body = f"data: {frame}\n\n".encode()
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                         + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
            await writer.drain()
        else:
            await _send_json(writer, 404, {"error": {"code": "run_not_found", "message": "Run not found"}})
