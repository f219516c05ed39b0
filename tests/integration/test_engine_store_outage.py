"""A run whose store writes fail (StoreUnavailable) ends FAILED once the store is back: the engine keeps trying to
record the failure with capped backoff, without a busy loop, and a run task never inherits a request's deadline."""

from __future__ import annotations

import asyncio
import contextvars

import pytest

from domain import events as ev
from domain.run import RunStatus
from engine.store.deadline import REQUEST_DEADLINE
from engine.store.event_store import StoreUnavailable
from tests.support.engine_runs import engine_settings, running, start, wait_for_event, wait_until

pytestmark = pytest.mark.store


class Outage:
    """Fails every append of the real store with StoreUnavailable while on; counts the attempts."""

    def __init__(self, store) -> None:
        self.append = store.append_to_stream
        self.on = False
        self.refused = 0
        store.append_to_stream = self._append

    async def _append(self, events):
        if self.on:
            self.refused += 1
            raise StoreUnavailable("the disk is full")
        return await self.append(events)


async def test_a_run_cut_by_a_store_outage_ends_failed_when_the_store_is_back_with_no_busy_loop(store, tmp_path):
    async with running(engine_settings(store, tmp_path / "data", scripted_pace_seconds=0.02)) as services:
        outage = Outage(services.store)
        run_id = await start(services, "demo-report", {"topic": "tides"})
        await wait_for_event(services, run_id, lambda e: isinstance(e, ev.NodeStreamed))
        outage.on = True
        await asyncio.sleep(2.0)
        refused = outage.refused
        outage.on = False
        run = await wait_until(services, run_id, RunStatus.FAILED, timeout=15)
        failure = (await services.runs.events(run_id))[-1]
    print(f"\n{refused} appends refused in a 2 s outage; the failure was recorded after it")
    assert refused <= 8, "the engine retried in a busy loop"
    assert run.status is RunStatus.FAILED
    assert isinstance(failure, ev.RunFailed)
    assert failure.error_code == "STORE_UNAVAILABLE"
    assert failure.error == "the store could not record the run's events (it was unavailable; the server log has the details)"


async def test_a_run_started_inside_a_request_deadline_does_not_inherit_it(store, tmp_path):
    async with running(engine_settings(store, tmp_path / "data", scripted_pace_seconds=0.01)) as services:
        seen: list[float | None] = []
        outage = Outage(services.store)
        original = outage.append

        async def watching(events):
            seen.append(REQUEST_DEADLINE.get())
            return await original(events)

        outage.append = watching

        async def request():
            REQUEST_DEADLINE.set(asyncio.get_running_loop().time() + 1.0)
            return await start(services, "demo-report", {"topic": "tides"})

        run_id = await asyncio.create_task(request(), context=contextvars.copy_context())
        in_request = len(seen)
        await wait_until(services, run_id, RunStatus.SUCCEEDED)
    assert seen[0] is not None, "the request's own appends carry its deadline"
    assert len(seen) > in_request and all(d is None for d in seen[in_request:]), seen
