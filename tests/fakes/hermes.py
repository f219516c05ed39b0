"""The model behind a real Hermes gateway in tests: FakeOpenAI plus `GET /v1/models` and non-streaming answers.

The gateway streams its agent turns (programmed with `will_*`, one reply per streaming call)
and makes one non-streaming call of its own (a session title): that one is always answered
with a short text and never consumes a programmed reply.
"""

from __future__ import annotations

import asyncio
import json

from tests.fakes.loopback import LoopbackServer
from tests.fakes.openai_server import FakeOpenAI, _read_request, _send_json

MODEL = "fake-model"


class FakeGatewayModel(FakeOpenAI):
    """Serves the gateway's model calls on 127.0.0.1; `streamed` keeps the bodies of its streaming calls."""

    def __init__(self) -> None:
        super().__init__()
        self.streamed: list[dict] = []

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
