"""One gateway run, from the id the gateway gave it to its end: followed, answered, stopped, and recorded once.

The run is followed through its event stream (every event copied into the visit's log as it
arrives) or, when the stream is lost or the run is taken up again after the engine stopped,
through `GET /v1/runs/{id}` (0.19.0 keeps a run's status an hour after it ends). A status that
cannot be read is asked again for `status_retry_seconds`; after that the outcome is unknown.
A stop is confirmed only by the gateway (the run ends `cancelled`), within `stop_confirm_seconds`;
otherwise it is recorded unconfirmed: the remote work may still be running.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime
from typing import Any

import msgspec

from domain.failures import without_addresses
from domain.vocabulary import RemoteRunOutcome
from engine.clock import utcnow
from engine.hermes.client import GatewayClient, GatewayError, StreamDropped, StreamIdle
from engine.hermes.events import TERMINAL_EVENTS, chunk_for
from engine.hermes.gateways import HermesGateway
from engine.hermes.ports import RemoteEnd, RemoteFacts, VisitSink

STOP_REQUEST_SECONDS = 5.0
"""How long the stop request itself may take."""
STATUS_POLL_SECONDS = 0.5
UNREADABLE_BACKOFF_SECONDS = (0.5, 1.0, 2.0, 5.0)
"""Waits between reads of a status that cannot be read (the last repeats)."""
TERMINAL_STATUSES = frozenset({"completed", "failed", "cancelled"})


class HermesFailure(Exception):
    """A Hermes run that gave no answer; `code` says why (`run_failed`, `idle_timeout`, `remote_outcome_unknown`...)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"hermes {code}: {message}")
        self.code = code


class RemoteOutcomeUnknown(HermesFailure):
    """The outcome of a submitted gateway run cannot be read: whether its work happened is not known.

    Its text starts with the machine-readable code `REMOTE_OUTCOME_UNKNOWN:` (the run's error code in listings).
    """

    def __init__(self, detail: str) -> None:
        super().__init__("remote_outcome_unknown", detail)
        self.detail = detail
        self.args = (f"REMOTE_OUTCOME_UNKNOWN: hermes remote_outcome_unknown: {detail}",)


class Ending(msgspec.Struct, frozen=True):
    """What the gateway says at a run's end: its status, answer, usage and error."""

    status: str
    output: str = ""
    usage: dict[str, Any] = {}
    error: str = ""


_STOPPING: dict[str, asyncio.Future[Ending | None]] = {}
"""The stops in progress in this process, by gateway run id."""


class _Idle(Exception):
    """Nothing came from the gateway (no event, no status change) within the idle timeout."""


class _Unreadable(Exception):
    """The run's status cannot be read any more."""


class _ApprovalFailed(Exception):
    """Answering an approval request failed."""


def ending_of(status: dict[str, Any]) -> Ending | None:
    """The end a `GET /v1/runs/{id}` answer (or a terminal event) reports; None while the run goes on."""
    state = status.get("status") or {"run.completed": "completed", "run.failed": "failed",
                                     "run.cancelled": "cancelled"}.get(str(status.get("event")))
    if state not in TERMINAL_STATUSES:
        return None
    output, usage, error = status.get("output"), status.get("usage"), status.get("error")
    return Ending(str(state), output if isinstance(output, str) else "", usage if isinstance(usage, dict) else {},
                  without_addresses(str(error)) if error else "")


def _tokens(usage: dict[str, Any], name: str) -> int:
    value = usage.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


class GatewayRun:
    """A visit's gateway run with a known id."""

    def __init__(self, client: GatewayClient, gateway: HermesGateway, sink: VisitSink, facts: RemoteFacts, *,
                 session_id: str, attempt: int, remote_run_id: str, requested_at: datetime) -> None:
        self.client = client
        self.gateway = gateway
        self.sink = sink
        self.facts = facts
        self.session_id = session_id
        self.attempt = attempt
        self.remote_run_id = remote_run_id
        self.requested_at = requested_at
        self.text: list[str] = []

    @property
    def name(self) -> str:
        """How status lines name the run."""
        return f"hermes run {self.remote_run_id}"

    async def answer(self, *, stream: bool) -> str:
        """The run's answer: followed through its events (`stream`) or its status; a cancel stops it first.

        The end is recorded here, once. When the visit's task is cancelled, a time limit stops the run;
        a process that is handing its runs over leaves it running (the log names it for the next one).
        """
        watch = asyncio.ensure_future(self._events() if stream else self._polled())
        cancel = asyncio.ensure_future(self.sink.cancel_event.wait())
        try:
            await asyncio.wait({watch, cancel}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            cancel.cancel()
            if self.sink.handing_over:
                await _cancelled(watch)
            else:
                await asyncio.shield(self.stop("timeout", watch))
            raise
        cancel.cancel()
        if not watch.done():
            await self.stop("cancelled", watch)
            self.sink.check_cancel()
            raise HermesFailure("cancelled", "the flowtrail run was cancelled")
        return await self._settled(watch)

    async def _settled(self, watch: asyncio.Future[Ending]) -> str:
        try:
            ending = watch.result()
        except _Idle as idle:
            await self.stop("idle_timeout", None)
            raise HermesFailure("idle_timeout", f"{idle}; the gateway was asked to stop the run") from None
        except _ApprovalFailed as failed:
            await self.stop("approval_failed", None)
            raise HermesFailure("approval_failed", f"answering the approval request failed: {failed}") from None
        except _Unreadable as unreadable:
            await self.end("unknown", reason="status_unreadable", error=str(unreadable))
            raise RemoteOutcomeUnknown(f"{self.name} on gateway {self.gateway.id!r}: {unreadable}") from None
        return await self.finished(ending)

    async def finished(self, ending: Ending, reason: str = "") -> str:
        """Record the end the gateway reported; the answer of a completed run, else the failure it is."""
        outcome: RemoteRunOutcome = "completed" if ending.status == "completed" else (
            "cancelled" if ending.status == "cancelled" else "failed")
        output = ending.output or "".join(self.text)
        await self.end(outcome, reason=reason or ("" if outcome == "completed" else f"run_{outcome}"),
                       error=ending.error, output=output if outcome == "completed" else "", usage=ending.usage)
        if outcome == "completed":
            usage = f" (usage {msgspec.json.encode(ending.usage).decode()})" if ending.usage else ""
            await self.sink.status(f"{self.name} completed{usage}")
            return output
        if outcome == "failed":
            raise HermesFailure("run_failed", ending.error or "the gateway run failed")
        raise HermesFailure("run_cancelled", "the gateway run was cancelled")

    async def end(self, outcome: RemoteRunOutcome, *, reason: str = "", error: str = "", output: str = "",
                  usage: dict[str, Any] | None = None) -> None:
        """Record the run's end (its metering record)."""
        usage = usage or {}
        await self.facts.ended(RemoteEnd(
            gateway_id=self.gateway.id, session_id=self.session_id, attempt=self.attempt, outcome=outcome,
            remote_run_id=self.remote_run_id, duration_ms=round((utcnow() - self.requested_at).total_seconds() * 1000, 3),
            prompt_tokens=_tokens(usage, "input_tokens"), completion_tokens=_tokens(usage, "output_tokens"),
            reason=reason, error=error, output=output,
        ))

    # ---- stopping ----------------------------------------------------------------------

    async def stop(self, reason: str, watch: asyncio.Future[Ending] | None) -> Ending | None:
        """Ask the gateway to stop the run and wait, at most `stop_confirm_seconds`, for it to confirm; the end is
        recorded either way (`stop_unconfirmed` when no confirmation came). The end the gateway reported, if any.

        One stop per run in this process: a second asks for nothing and waits for the first (a visit task cut short
        while stopping leaves its stop running, and the run's end then settles the same gateway run).
        """
        stopping = _STOPPING.get(self.remote_run_id)
        if stopping is None:
            stopping = _STOPPING[self.remote_run_id] = asyncio.ensure_future(self._stop(reason, watch))
            stopping.add_done_callback(lambda _: _STOPPING.pop(self.remote_run_id, None))
        return await asyncio.shield(stopping)

    async def _stop(self, reason: str, watch: asyncio.Future[Ending] | None) -> Ending | None:
        await self.facts.stop_requested(self.attempt, self.remote_run_id, reason)
        problem = await self._send_stop()
        confirm = watch if watch is not None and not watch.done() else asyncio.ensure_future(self._polled())
        ending = await self._confirmation(confirm)
        if ending is None:
            seconds = self.gateway.stop_confirm_seconds
            why = problem or f"the gateway did not confirm the stop within {seconds:g} s"
            await self.end("stop_unconfirmed", reason=reason, error=why)
            await self.sink.status(f"{self.name}: {why}; the remote work may still be running")
            return None
        with contextlib.suppress(HermesFailure):
            await self.finished(ending, reason=reason)
        if ending.status == "cancelled":
            await self.sink.status(f"{self.name} was stopped (the gateway confirmed it, {reason})")
        return ending

    async def _send_stop(self) -> str | None:
        """`POST /v1/runs/{id}/stop`, bounded; what went wrong, if anything (a run already over is not a problem)."""
        try:
            async with asyncio.timeout(STOP_REQUEST_SECONDS):
                await self.client.stop(self.remote_run_id)
        except TimeoutError:
            return f"the stop request got no answer within {STOP_REQUEST_SECONDS:g} s"
        except GatewayError as error:
            return f"the stop request failed: {error.message}"
        return None

    async def _confirmation(self, confirm: asyncio.Future[Ending]) -> Ending | None:
        try:
            async with asyncio.timeout(self.gateway.stop_confirm_seconds):
                try:
                    return await confirm
                except (_Idle, _Unreadable, _ApprovalFailed, HermesFailure):
                    return await self._polled()
        except (TimeoutError, _Idle, _Unreadable):
            return None
        finally:
            await _cancelled(confirm)

    # ---- following -----------------------------------------------------------------------

    async def _events(self) -> Ending:
        """The run's end from its event stream, each event copied into the visit's log; its status once the stream is lost."""
        idle = self.gateway.idle_timeout_seconds
        try:
            async with contextlib.aclosing(self.client.events(self.remote_run_id, idle)) as events:
                async for event in events:
                    ending = await self._take(event)
                    if ending is not None:
                        return ending
        except StreamIdle:
            raise _Idle(f"no event from the gateway for {idle:g} s") from None
        except StreamDropped as error:
            await self.sink.status(f"the gateway's event stream dropped ({error}); reading the run's outcome")
        except GatewayError as error:
            await self.sink.status(f"the gateway's event stream could not be read ({error.message}); reading the run's outcome")
        else:
            await self.sink.status("the gateway's event stream ended without the run's end; reading the run's outcome")
        return await self._polled()

    async def _take(self, event: dict[str, Any]) -> Ending | None:
        """Copy one event into the log and act on it; the end when the event ends the run."""
        chunk = chunk_for(event)
        if chunk is not None:
            await self.sink.stream(chunk.kind, chunk.content, chunk.tool_name)
        kind = event.get("event")
        if kind == "message.delta":
            self.text.append(str(event.get("delta", "")))
        elif kind == "approval.request":
            await self._approve()
        elif kind in TERMINAL_EVENTS:
            return ending_of(event)
        return None

    async def _approve(self) -> None:
        choice = "once" if self.gateway.auto_approve else "deny"
        try:
            await self.client.answer_approval(self.remote_run_id, choice)
        except GatewayError as error:
            if error.error_code == "approval_not_pending":
                return
            raise _ApprovalFailed(error.message) from None
        await self.sink.status(f"hermes approval request answered {choice!r} (auto_approve={self.gateway.auto_approve})")

    async def _polled(self) -> Ending:
        """The run's end from `GET /v1/runs/{id}`, polled; approvals answered; bounded by the idle timeout."""
        loop = asyncio.get_running_loop()
        last_change, last_seen = loop.time(), None
        while True:
            status = await self._status()
            ending = ending_of(status)
            if ending is not None:
                return ending
            if status.get("status") == "waiting_for_approval":
                await self._approve()
            if status.get("updated_at") != last_seen:
                last_change, last_seen = loop.time(), status.get("updated_at")
            elif loop.time() - last_change > self.gateway.idle_timeout_seconds:
                raise _Idle(f"the run's status did not change for {self.gateway.idle_timeout_seconds:g} s")
            await asyncio.sleep(STATUS_POLL_SECONDS)

    async def _status(self) -> dict[str, Any]:
        """The run's status; asked again for `status_retry_seconds` while it cannot be read (not for a run the
        gateway does not know: 0.19.0 forgets a run an hour after it ends, and every run when it restarts)."""
        loop = asyncio.get_running_loop()
        since, waits = loop.time(), 0
        while True:
            try:
                return await self.client.run_status(self.remote_run_id)
            except GatewayError as error:
                if error.code == "not_found":
                    raise _Unreadable("the gateway no longer knows the run") from None
                if loop.time() - since >= self.gateway.status_retry_seconds:
                    raise _Unreadable(
                        f"its status could not be read for {self.gateway.status_retry_seconds:g} s ({error.message})"
                    ) from None
            await asyncio.sleep(UNREADABLE_BACKOFF_SECONDS[min(waits, len(UNREADABLE_BACKOFF_SECONDS) - 1)])
            waits += 1


async def _cancelled(task: asyncio.Future[Any]) -> None:
    """Cancel a task unless it is done, and wait for it."""
    if not task.done():
        task.cancel()
    await asyncio.gather(task, return_exceptions=True)
