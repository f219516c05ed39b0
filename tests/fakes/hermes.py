"""The model behind a real Hermes gateway in tests: FakeOpenAI plus `GET /v1/models` and non-streaming answers.

The gateway streams its agent turns (programmed with `will_*`, one reply per streaming call)
and makes one non-streaming call of its own (a session title): that one is always answered
with a short text and never consumes a programmed reply.
"""

from __future__ import annotations

import asyncio
import json

from engine.hermes.probe import REQUIRED_FEATURES
from tests.fakes.loopback import LoopbackServer
from tests.fakes.openai_server import FakeOpenAI, _read_request, _send_json

MODEL = "fake-model"


class FakeGatewayModel(FakeOpenAI):
    """Serves the gateway's model calls on 127.0.0.1; `streamed` keeps the bodies of its streaming calls."""

    def __init__(self) -> None:
        super().__init__()
        self.streamed: list[dict] = []

    def reset(self) -> None:
        """Forget programmed replies and recorded requests."""
        self.requests.clear()
        self.streamed.clear()
        self._replies.clear()

    def release_hangs(self) -> None:
        """End every hanging reply now (the connection closes); later hangs hang again."""
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


class CuttingProxy(LoopbackServer):
    """A TCP proxy to a gateway that drops the client's connection right after the first event of a run's stream.

    `requests` keeps every request line that went through, so a test can count submissions.
    """

    def __init__(self, upstream_port: int) -> None:
        super().__init__()
        self.upstream_port = upstream_port
        self.requests: list[str] = []
        self.cuts = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Pipe bytes both ways; cut an events stream after its first `data:` frame."""
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        streaming = asyncio.Event()

        async def to_gateway() -> None:
            while data := await reader.read(65536):
                self.requests += [line for line in data.decode("latin-1").split("\r\n") if " HTTP/1.1" in line]
                if b"/events HTTP/1.1" in data:
                    streaming.set()
                up_writer.write(data)
                await up_writer.drain()

        async def to_client() -> None:
            while data := await up_reader.read(65536):
                writer.write(data)
                await writer.drain()
                if streaming.is_set() and b"data: " in data:
                    self.cuts += 1
                    writer.transport.abort()
                    return

        try:
            await asyncio.wait([asyncio.ensure_future(to_gateway()), asyncio.ensure_future(to_client())],
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            up_writer.close()


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
