"""The HTTP client of one Hermes Agent gateway: bearer auth, explicit timeouts, redirects never followed.

Errors never carry the key or the gateway's address (they reach run errors that clients read): they name
the gateway by its id, the path and what went wrong. The address is logged for the operator.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncGenerator
from typing import Any

import httpx
import msgspec
from httpx_sse import EventSource

from engine.hermes.gateways import HermesGateway

logger = logging.getLogger("flowtrail.hermes")

CONNECT_SECONDS = 10.0
READ_SECONDS = 30.0
WRITE_SECONDS = 30.0
POOL_SECONDS = 10.0


class GatewayError(Exception):
    """A gateway request that failed; `code` is `unreachable` (nothing was sent), `lost` (sent, no answer),
    `unauthorized`, `not_found` or `http_error`."""

    def __init__(self, code: str, message: str, status: int | None = None, error_code: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.error_code = error_code


class StreamDropped(Exception):
    """The event stream's connection broke before the stream ended."""


class StreamIdle(Exception):
    """No byte (not even a keep-alive comment) arrived on the event stream within the idle timeout."""


def gateway_key(gateway: HermesGateway) -> str | None:
    """The gateway's bearer key from its environment variable (None when unset or empty)."""
    return os.environ.get(gateway.api_key_env) or None


def timeouts(read: float = READ_SECONDS) -> httpx.Timeout:
    """Explicit connect/read/write/pool timeouts."""
    return httpx.Timeout(connect=CONNECT_SECONDS, read=read, write=WRITE_SECONDS, pool=POOL_SECONDS)


class GatewayClient:
    """Requests to one gateway; `aclose` releases its connections."""

    def __init__(self, gateway: HermesGateway, key: str, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.gateway = gateway
        self._http = httpx.AsyncClient(
            base_url=gateway.base_url.rstrip("/"), headers={"Authorization": f"Bearer {key}"},
            timeout=timeouts(), follow_redirects=False, transport=transport,
        )

    async def aclose(self) -> None:
        """Close the connections."""
        await self._http.aclose()

    async def capabilities(self) -> dict[str, Any]:
        """`GET /v1/capabilities`."""
        return await self._json("GET", "/v1/capabilities")

    async def start_run(self, body: dict[str, Any], session_id: str) -> str:
        """`POST /v1/runs` (202); the gateway's run id. Never retried: a lost answer (`lost`) may be a started run."""
        headers = {"X-Hermes-Session-Id": session_id, "X-Hermes-Session": session_id}
        answer = await self._json("POST", "/v1/runs", json=body, headers=headers)
        run_id = answer.get("run_id")
        if not isinstance(run_id, str) or not run_id:
            raise GatewayError("http_error", "POST /v1/runs answered without a run_id")
        return run_id

    async def run_status(self, run_id: str) -> dict[str, Any]:
        """`GET /v1/runs/{id}`: the run's pollable status."""
        return await self._json("GET", f"/v1/runs/{run_id}")

    async def answer_approval(self, run_id: str, choice: str) -> dict[str, Any]:
        """`POST /v1/runs/{id}/approval`."""
        return await self._json("POST", f"/v1/runs/{run_id}/approval", json={"choice": choice})

    async def stop(self, run_id: str) -> None:
        """`POST /v1/runs/{id}/stop` (a finished run answers 404: nothing to stop)."""
        try:
            await self._json("POST", f"/v1/runs/{run_id}/stop")
        except GatewayError as error:
            if error.code != "not_found":
                raise

    async def session_messages(self, session_id: str) -> list[dict[str, Any]] | None:
        """`GET /api/sessions/{id}/messages`; None when the session does not exist (404)."""
        try:
            answer = await self._json("GET", f"/api/sessions/{session_id}/messages")
        except GatewayError as error:
            if error.code == "not_found":
                return None
            raise
        rows = answer.get("data")
        return [row for row in rows if isinstance(row, dict)] if isinstance(rows, list) else []

    async def events(self, run_id: str, idle_seconds: float) -> AsyncGenerator[dict[str, Any], None]:
        """The run's SSE events as JSON objects, as they arrive; ends when the gateway closes the stream.

        StreamIdle: nothing at all arrived for `idle_seconds` (keep-alive comments count);
        StreamDropped: the connection broke. The stream has one consumer: it cannot be re-opened.
        """
        request = self._http.build_request("GET", f"/v1/runs/{run_id}/events", timeout=timeouts(read=idle_seconds),
                                           headers={"Accept": "text/event-stream"})
        try:
            response = await self._http.send(request, stream=True)
        except httpx.ReadTimeout:
            raise StreamIdle() from None
        except httpx.TransportError as error:
            raise _unreachable(self.gateway, error) from None
        try:
            if response.status_code != 200:
                await response.aread()
                raise _status_error(self.gateway, "GET", request.url.path, response)
            async for sse in EventSource(response).aiter_sse():
                try:
                    event = msgspec.json.decode(sse.data)
                except msgspec.DecodeError:
                    continue
                if isinstance(event, dict):
                    yield event
        except httpx.ReadTimeout:
            raise StreamIdle() from None
        except httpx.TransportError as error:
            raise StreamDropped(type(error).__name__) from None
        finally:
            await response.aclose()

    async def _json(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        try:
            response = await self._http.request(method, path, **kwargs)
        except httpx.TransportError as error:
            raise _unreachable(self.gateway, error) from None
        if response.status_code >= 300:
            raise _status_error(self.gateway, method, path, response)
        try:
            answer = msgspec.json.decode(response.content)
        except msgspec.DecodeError:
            raise GatewayError("http_error", f"{method} {path} answered with a body that is not JSON") from None
        if not isinstance(answer, dict):
            raise GatewayError("http_error", f"{method} {path} answered with JSON that is not an object")
        return answer


NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.UnsupportedProtocol)
"""Transport errors raised before a request left: the gateway cannot have acted on it."""


def _unreachable(gateway: HermesGateway, error: httpx.TransportError) -> GatewayError:
    logger.warning("gateway %s at %s: %s", gateway.id, gateway.base_url, type(error).__name__)
    if isinstance(error, NOT_SENT):
        return GatewayError("unreachable", f"gateway {gateway.id!r} is unreachable ({type(error).__name__})")
    return GatewayError("lost", f"gateway {gateway.id!r} gave no answer ({type(error).__name__}); the request may have been acted on")


def _status_error(gateway: HermesGateway, method: str, path: str, response: httpx.Response) -> GatewayError:
    error_code = _error_code(response)
    status = response.status_code
    code = {401: "unauthorized", 403: "unauthorized", 404: "not_found"}.get(status, "http_error")
    if 300 <= status < 400:
        detail = "a redirect, which is never followed"
    else:
        detail = f"HTTP {status}" + (f" {error_code}" if error_code else "")
    return GatewayError(code, f"gateway {gateway.id!r}: {method} {path} answered {detail}", status, error_code)


def _error_code(response: httpx.Response) -> str | None:
    try:
        body = msgspec.json.decode(response.content)
    except msgspec.DecodeError:
        return None
    error = body.get("error") if isinstance(body, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, str) else None
