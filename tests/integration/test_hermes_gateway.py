"""agent and smartAction nodes on the real Hermes Agent gateway (hermes-agent 0.19.0), its model a fake of ours."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from domain import events as ev
from domain.remote_run import end_remote_run
from domain.run import RunStatus, fold, request_cancel
from engine.bootstrap import Services
from engine.clock import utcnow
from engine.context.section import CLOSE, OPEN
from engine.hermes.agent import RemoteAgent
from engine.hermes.events import FINAL_TEXT
from engine.hermes.gateways import HermesGateway
from engine.hermes.probe import probe, probe_gateways
from engine.store import EventStore, parse_database_url
from projections.summary import summarize
from tests.fakes.hermes import EndingGateway, GatewayProxy, IncompatibleGateway
from tests.support.engine_runs import (
    chunks,
    edge,
    engine_settings,
    events_of,
    executor,
    node,
    of_type,
    running,
    start,
    text_turn,
    wait_for_event,
    wait_until,
    workflow,
)
from tests.support.hermes_gateway import KEY_ENV, Gateway, free_port


def configured(gateway: Gateway, **options) -> HermesGateway:
    """Our configuration of the test gateway."""
    return HermesGateway(id="test", base_url=gateway.base_url, api_key_env=KEY_ENV, **options)


async def test_a_reachable_gateway_with_the_right_key_is_ok(keyed_gateway):
    assert (await probe(configured(keyed_gateway))).status == "ok"


async def test_a_wrong_key_is_unauthorized(hermes_gateway, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "not-the-gateway-key-at-all")
    result = await probe(configured(hermes_gateway))
    assert result.status == "unauthorized" and "invalid_api_key" in result.detail


async def test_a_key_variable_that_is_not_set_is_key_missing(hermes_gateway, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    result = await probe(configured(hermes_gateway))
    assert result.status == "key_missing" and KEY_ENV in result.detail


async def test_a_gateway_that_is_down_is_unreachable(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "whatever-key-0123456789")
    down = HermesGateway(id="down", base_url=f"http://127.0.0.1:{free_port()}", api_key_env=KEY_ENV)
    assert (await probe(down)).status == "unreachable"


async def test_no_gateway_configured_or_an_unknown_one_is_not_configured(keyed_gateway):
    assert [r.status for r in await probe_gateways([])] == ["not_configured"]
    assert [(r.gateway, r.status) for r in await probe_gateways([configured(keyed_gateway)], "other")] == [
        ("other", "not_configured")]


async def test_a_gateway_that_lacks_a_required_feature_is_incompatible_naming_it(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "whatever-key-0123456789")
    fake = IncompatibleGateway()
    await fake.start()
    try:
        result = await probe(HermesGateway(id="old", base_url=f"http://127.0.0.1:{fake.port}", api_key_env=KEY_ENV))
    finally:
        await fake.stop()
    assert (result.status, result.detail) == ("incompatible", "missing: run_stop")


async def check(*args: str, gateways: list[dict], env: dict[str, str]) -> tuple[int, str]:
    """`flowtrail hermes check ARGS` in a child process; its exit code and output."""
    environment = {**os.environ, **env, "FLOWTRAIL_HERMES_GATEWAYS": json.dumps(gateways)}
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "scripts.cli", "hermes", "check", *args, env=environment,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await child.communicate()
    return child.returncode or 0, output.decode()


async def test_hermes_check_prints_each_gateway_and_fails_unless_all_are_ok(keyed_gateway):
    good = {"id": "good", "base_url": keyed_gateway.base_url, "api_key_env": KEY_ENV}
    keyless = {"id": "keyless", "base_url": keyed_gateway.base_url, "api_key_env": "FLOWTRAIL_TEST_HERMES_UNSET"}
    code, output = await check(gateways=[good, keyless], env={KEY_ENV: keyed_gateway.key})
    assert code == 1 and output.splitlines() == [
        "good: ok", "keyless: key_missing (the environment variable FLOWTRAIL_TEST_HERMES_UNSET is not set)"]
    assert (await check("good", gateways=[good, keyless], env={KEY_ENV: keyed_gateway.key})) == (0, "good: ok\n")
    assert keyed_gateway.key not in output


pytestmark = pytest.mark.timeout(600)
"""The first test to need the gateway may install it (a minute or two) and start it."""
ON_SQLITE_ONLY = pytest.mark.parametrize("store", ["sqlite"], indirect=True)
"""What the gateway does with a visit does not depend on the event store, so these tests run on SQLite only; those
whose point goes through the store (every delta in our log, a cancel, a restart and recovery) run on both."""


@pytest_asyncio.fixture
async def hermes_services(keyed_gateway: Gateway, store: str, tmp_path: Path, request) -> AsyncIterator[Services]:
    """Started services whose one gateway is the test gateway (options from the `hermes` marker)."""
    marker = request.node.get_closest_marker("hermes")
    options = marker.kwargs if marker else {}
    settings = engine_settings(store, tmp_path / "data", load_demos=False,
                               hermes_gateways=(configured(keyed_gateway, **options),))
    async with running(settings) as services:
        yield services


def remote_flow(name: str, mode: str = "DAG", **data) -> dict:
    """userInput -> a remote agent `work` -> output `answer` (= work.text)."""
    work = node("work", "agent", backend="hermes_remote", prompt="Greet {{who}}", **data)
    out = node("out", "output", outputs=[{"name": "answer", "value": "{{work.text}}"}])
    return workflow(name, [node("input", "userInput", inputs=[{"name": "who"}]), work, out], [edge("input", "work"), edge("work", "out")], mode)


async def run_to_end(services: Services, flow: dict, variables: dict | None = None, timeout: float = 120.0):
    """Publish the flow, run it to its end; the run and its events."""
    await services.catalogue.publish(flow)
    run_id = await start(services, flow["name"], variables or {"who": "Ada"})
    run = await wait_until(services, run_id, timeout=timeout)
    return run, await events_of(services, run_id)


def without_context(prompt: str) -> str:
    """A prompt as the node wrote it: what follows the context section the engine puts first (if any)."""
    return prompt.split(CLOSE + "\n\n", 1)[-1]


def answer_text(events) -> str:
    """The answer's text as our log copied it, delta by delta."""
    return "".join(json.loads(c.content)["preview"] for c in chunks(events, "tool_progress", "work")
                   if c.tool_name == FINAL_TEXT)


@pytest.mark.store
async def test_a_plain_answer_comes_through_the_gateway_and_every_delta_is_in_our_log(hermes_services, hermes_model):
    hermes_model.will_stream_text("Hello ", "Ada", "!", reasoning=("Thinking about Ada.",))
    run, events = await run_to_end(hermes_services, remote_flow("hermes-plain", systemPrompt="You are terse."))
    assert run.status is RunStatus.SUCCEEDED, [c.content for c in chunks(events, "status")]
    assert of_type(events, ev.RunCompleted)[0].output["data"] == {"answer": "Hello Ada!"}
    assert answer_text(events) == "Hello Ada!"
    assert "".join(c.content for c in chunks(events, "thinking", "work")) == "Hello Ada!"
    sent = hermes_model.streamed[0]["messages"]
    assert (sent[-1]["role"], without_context(sent[-1]["content"])) == ("user", "Greet Ada")
    assert "You are terse." in sent[0]["content"] and "flowtrail" in sent[0]["content"]


@ON_SQLITE_ONLY
async def test_gateway_tool_calls_become_tool_call_and_tool_result_lines(hermes_services, hermes_model):
    hermes_model.will_run_command("echo flowtrail-was-here")
    hermes_model.will_stream_text("Done.")
    run, events = await run_to_end(hermes_services, remote_flow("hermes-tools"))
    assert run.status is RunStatus.SUCCEEDED, [c.content for c in chunks(events, "status")]
    calls = chunks(events, "tool_call", "work")
    results = chunks(events, "tool_result", "work")
    assert [c.tool_name for c in calls] == ["terminal"] and "echo flowtrail-was-here" in calls[0].content
    assert [c.tool_name for c in results] == ["terminal"] and json.loads(results[0].content)["error"] is False
    assert "flowtrail-was-here" in json.dumps(hermes_model.streamed[1]["messages"][-1])


async def accepted_and_answering(services, hermes_model, name: str) -> ev.RemoteRunAccepted:
    """Publish and start a remote flow `name`; its gateway run's acceptance, once the model is answering it."""
    await services.catalogue.publish(remote_flow(name))
    run_id = await start(services, name, {"who": "Ada"})
    accepted = await wait_for_event(services, run_id, lambda e: isinstance(e, ev.RemoteRunAccepted), timeout=60)
    while not hermes_model.streamed:
        await asyncio.sleep(0.05)
    assert isinstance(accepted, ev.RemoteRunAccepted)
    return accepted


def gateway_runs(events) -> list[str]:
    """The gateway run ids our log names, in order."""
    return [accepted.remote_run_id for accepted in of_type(events, ev.RemoteRunAccepted)]


async def gateway_status(gateway: Gateway, run_id: str) -> dict:
    """The gateway's own record of one of its runs."""
    async with httpx.AsyncClient(base_url=gateway.base_url, headers={"Authorization": f"Bearer {gateway.key}"}) as client:
        return (await client.get(f"/v1/runs/{run_id}")).json()


async def gateway_status_becomes(gateway: Gateway, run_id: str, *wanted: str, timeout: float = 30.0) -> str:
    """The gateway run's status once it is one of `wanted` (the last seen one after `timeout`)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    status = ""
    while loop.time() < deadline:
        status = (await gateway_status(gateway, run_id)).get("status", "")
        if status in wanted:
            break
        await asyncio.sleep(0.1)
    return status


@ON_SQLITE_ONLY
@pytest.mark.hermes(idle_timeout_seconds=1.5)
async def test_a_silent_gateway_fails_the_visit_with_idle_timeout_once_it_confirmed_the_stop(hermes_services, hermes_model, keyed_gateway):
    hermes_model.will_hang_after("Hel")
    run, events = await run_to_end(hermes_services, remote_flow("hermes-idle"))
    failed = of_type(events, ev.VisitFailed)
    assert run.status is RunStatus.FAILED and "hermes idle_timeout" in failed[0].error
    (run_id,) = gateway_runs(events)
    assert positions(events, ev.RemoteRunStopRequested, reason="idle_timeout")
    assert [(e.outcome, e.reason) for e in of_type(events, ev.RemoteRunEnded)] == [("cancelled", "idle_timeout")]
    assert (await gateway_status(keyed_gateway, run_id))["status"] == "cancelled"


def positions(events, kind, **fields) -> list[int]:
    """The positions of the events of one type (with these field values)."""
    return [e.originator_version for e in of_type(events, kind) if all(getattr(e, k) == v for k, v in fields.items())]


async def cancel_in_flight(services: Services, flow: dict, model) -> tuple:
    """Start `flow`, cancel it once its gateway run is in flight; the run's end state and events."""
    await services.catalogue.publish(flow)
    run_id = await start(services, flow["name"], {"who": "Ada"})
    await wait_for_event(services, run_id, lambda e: isinstance(e, ev.RemoteRunAccepted), timeout=60)
    while not model.streamed:
        await asyncio.sleep(0.05)
    await executor(services).cancel(run_id)
    run = await wait_until(services, run_id, timeout=120)
    return run, await events_of(services, run_id)


@pytest.mark.store
async def test_a_cancel_is_recorded_at_once_and_the_run_is_cancelled_only_after_the_gateway_confirms_the_stop(
        hermes_services, hermes_model, keyed_gateway):
    hermes_model.will_hang_after("Thinking it over")
    run, events = await cancel_in_flight(hermes_services, remote_flow("hermes-cancel"), hermes_model)
    (gateway_run,) = gateway_runs(events)
    assert run.status is RunStatus.CANCELLED
    (requested,) = positions(events, ev.RunCancelRequested)
    (stop,) = positions(events, ev.RemoteRunStopRequested, reason="cancelled")
    (confirmed,) = positions(events, ev.RemoteRunEnded, outcome="cancelled")
    (cancelled,) = positions(events, ev.RunCancelled)
    assert requested < stop < confirmed < cancelled
    assert await gateway_status_becomes(keyed_gateway, gateway_run, "cancelled") == "cancelled"
    assert f"hermes run {gateway_run} was stopped (the gateway confirmed it, cancelled)" in [
        c.content for c in chunks(events, "status", "work")]
    assert not summarize(events).remote_work_may_be_running


@ON_SQLITE_ONLY
@pytest.mark.parametrize("refusal", ["fail", "swallow"])
async def test_a_stop_the_gateway_does_not_confirm_is_recorded_and_the_run_says_remote_work_may_still_be_running(
        keyed_gateway, hermes_model, store, tmp_path, refusal):
    hermes_model.will_hang_after("Thinking it over")
    proxy = GatewayProxy(int(keyed_gateway.base_url.rsplit(":", 1)[1]), refuse_stop=refusal)
    await proxy.start()
    try:
        async with services_on(store, tmp_path / "data", HermesGateway(
                id="test", base_url=f"http://127.0.0.1:{proxy.port}", api_key_env=KEY_ENV,
                stop_confirm_seconds=1.0)) as services:
            run, events = await cancel_in_flight(services, remote_flow(f"hermes-unconfirmed-{refusal}"), hermes_model)
    finally:
        await proxy.stop()
    (gateway_run,) = gateway_runs(events)
    (end,) = of_type(events, ev.RemoteRunEnded)
    assert run.status is RunStatus.CANCELLED and (end.outcome, end.reason) == ("stop_unconfirmed", "cancelled")
    why = "the stop request failed: " if refusal == "fail" else "the gateway did not confirm the stop within 1 s"
    assert end.error.startswith(why) and str(proxy.port) not in end.error
    assert any(line.startswith(f"hermes run {gateway_run}: {why}") and line.endswith("the remote work may still be running")
               for line in [c.content for c in chunks(events, "status", "work")])
    summary = summarize(events)
    assert summary.remote_work_may_be_running and summary.as_dict()["remoteWorkMayBeRunning"] is True
    assert (await gateway_status(keyed_gateway, gateway_run))["status"] == "running"


@pytest.mark.store
async def test_a_run_cancelled_while_no_process_followed_its_gateway_run_stops_that_run_before_it_is_cancelled(
        keyed_gateway, hermes_model, store, tmp_path):
    hermes_model.will_hang_after("Thinking it over")
    settings = engine_settings(store, tmp_path / "data", load_demos=False, hermes_gateways=(configured(keyed_gateway),))
    async with running(settings) as services:
        run_id = (await accepted_and_answering(services, hermes_model, "hermes-cancel-while-down")).originator_id
    append_cancel_request(store, run_id)
    async with running(settings) as services:
        run = await wait_until(services, run_id, timeout=120)
        events = await events_of(services, run_id)
    (gateway_run,) = gateway_runs(events)
    assert run.status is RunStatus.CANCELLED
    (stop,) = positions(events, ev.RemoteRunStopRequested, reason="cancelled")
    (confirmed,) = positions(events, ev.RemoteRunEnded, outcome="cancelled")
    assert stop < confirmed < positions(events, ev.RunCancelled)[0]
    assert await gateway_status_becomes(keyed_gateway, gateway_run, "cancelled") == "cancelled"


@pytest.mark.store
async def test_a_cancel_while_a_restarted_process_follows_the_gateway_run_stops_it_once_and_records_one_end(
        keyed_gateway, hermes_model, store, tmp_path):
    hermes_model.will_hang_after("Thinking it over")
    settings = engine_settings(store, tmp_path / "data", load_demos=False, hermes_gateways=(configured(keyed_gateway),))
    async with running(settings) as services:
        run_id = (await accepted_and_answering(services, hermes_model, "hermes-cancel-followed")).originator_id
    async with running(settings) as services:
        await wait_for_event(services, run_id, lambda e: isinstance(e, ev.NodeStreamed)
                             and e.content.startswith("following hermes run "), timeout=60)
        await executor(services).cancel(run_id)
        run = await wait_until(services, run_id, timeout=120)
        events = await events_of(services, run_id)
    assert run.status is RunStatus.CANCELLED
    assert [(e.outcome, e.reason) for e in of_type(events, ev.RemoteRunEnded)] == [("cancelled", "cancelled")]
    assert len(of_type(events, ev.RemoteRunStopRequested)) == 1 and len(gateway_runs(events)) == 1
    assert positions(events, ev.RemoteRunEnded)[0] < positions(events, ev.RunCancelled)[0]


@ON_SQLITE_ONLY
async def test_a_visit_taken_up_after_its_gateway_run_ended_uses_the_recorded_answer_and_asks_the_gateway_nothing(
        keyed_gateway, hermes_model, store, tmp_path):
    hermes_model.will_pause_between(["Hello "], ["from the log."])
    settings = engine_settings(store, tmp_path / "data", load_demos=False, hermes_gateways=(configured(keyed_gateway),))
    async with running(settings) as services:
        accepted = await accepted_and_answering(services, hermes_model, "hermes-ended-before")
        run_id = accepted.originator_id
    hermes_model.open_gate()
    assert await gateway_status_becomes(keyed_gateway, accepted.remote_run_id, "completed") == "completed"
    append_end(store, run_id, accepted, output="Hello from the log.")
    proxy = GatewayProxy(int(keyed_gateway.base_url.rsplit(":", 1)[1]))
    await proxy.start()
    try:
        async with services_on(store, tmp_path / "data", HermesGateway(
                id="test", base_url=f"http://127.0.0.1:{proxy.port}", api_key_env=KEY_ENV)) as services:
            run = await wait_until(services, run_id, timeout=120)
            events = await events_of(services, run_id)
    finally:
        await proxy.stop()
    assert run.status is RunStatus.SUCCEEDED and [line for line in proxy.requests if "/v1/runs" in line] == []
    assert of_type(events, ev.RunCompleted)[0].output["data"] == {"answer": "Hello from the log."}
    assert any(line.endswith("had completed before the engine stopped; using its answer")
               for line in [c.content for c in chunks(events, "status", "work")])
    assert len(hermes_model.streamed) == 1 and len(of_type(events, ev.RemoteRunEnded)) == 1


def append_end(url: str, run_id, accepted: ev.RemoteRunAccepted, output: str) -> None:
    """What a process leaves when it dies right after recording its gateway run's end: RemoteRunEnded, nothing after."""
    store = EventStore(parse_database_url(url))
    try:
        run = fold(store.read_stream(run_id))
        assert run is not None
        store.append_to_stream([end_remote_run(
            run, utcnow(), visit_uuid=accepted.visit_uuid, node_id=accepted.node_id, gateway_id="test",
            session_id="s", attempt=accepted.attempt, outcome="completed", remote_run_id=accepted.remote_run_id,
            output=output)])
    finally:
        store.close()


def append_cancel_request(url: str, run_id) -> None:
    """What a cancel through another process leaves while this one is down: RunCancelRequested in the log."""
    store = EventStore(parse_database_url(url))
    try:
        run = fold(store.read_stream(run_id))
        assert run is not None
        store.append_to_stream([request_cancel(run, utcnow())])
    finally:
        store.close()


@contextlib.asynccontextmanager
async def services_on(store: str, data_dir: Path, gateway: HermesGateway) -> AsyncIterator[Services]:
    """Started services whose one gateway is `gateway`."""
    async with running(engine_settings(store, data_dir, load_demos=False, hermes_gateways=(gateway,))) as services:
        yield services


@ON_SQLITE_ONLY
async def test_a_dropped_stream_is_followed_by_reading_the_run_never_by_submitting_it_again(
        keyed_gateway, hermes_model, store, tmp_path):
    hermes_model.will_pause_between(["Hello "], ["from ", "the ", "other ", "side."])
    run, events, proxy = await through_proxy(store, tmp_path, keyed_gateway, remote_flow("hermes-dropped"),
                                             cut_stream=True, then=hermes_model.open_gate)
    statuses = [c.content for c in chunks(events, "status", "work")]
    assert run.status is RunStatus.SUCCEEDED, statuses
    assert of_type(events, ev.RunCompleted)[0].output["data"] == {"answer": "Hello from the other side."}
    assert proxy.cuts == 1 and any("event stream dropped" in line for line in statuses)
    assert proxy.submissions() == ["POST /v1/runs HTTP/1.1"]
    assert any(line.startswith("GET /v1/runs/run_") and "/events" not in line for line in proxy.requests)


async def through_proxy(store: str, tmp_path: Path, gateway: Gateway, flow: dict, *, then=None, **proxied) -> tuple:
    """Run `flow` to its end on the gateway behind a GatewayProxy (`proxied`: its options, and gateway options),
    calling `then()` once the proxy cut the event stream; the run, its events and the proxy."""
    gateway_options = {key: proxied.pop(key) for key in list(proxied) if key.endswith("_seconds")}
    proxy = GatewayProxy(int(gateway.base_url.rsplit(":", 1)[1]), **proxied)
    await proxy.start()

    async def after_the_cut() -> None:
        while not proxy.cuts:
            await asyncio.sleep(0.05)
        if then is not None:
            then()

    watcher = asyncio.ensure_future(after_the_cut())
    try:
        async with services_on(store, tmp_path / "data", HermesGateway(
                id="test", base_url=f"http://127.0.0.1:{proxy.port}", api_key_env=KEY_ENV, **gateway_options)) as services:
            run, events = await run_to_end(services, flow)
    finally:
        watcher.cancel()
        await proxy.stop()
    return run, events, proxy


def status_reads(proxy: GatewayProxy) -> int:
    return sum(1 for line in proxy.requests if line.startswith("GET /v1/runs/run_") and "/events" not in line)


@ON_SQLITE_ONLY
async def test_a_lost_stream_whose_status_cannot_be_read_for_a_while_is_asked_again_until_it_can(
        keyed_gateway, hermes_model, store, tmp_path):
    hermes_model.will_pause_between(["Hello "], ["again."])
    run, events, proxy = await through_proxy(store, tmp_path, keyed_gateway, remote_flow("hermes-status-later"),
                                             cut_stream=True, failed_status_reads=3, then=hermes_model.open_gate)
    assert run.status is RunStatus.SUCCEEDED, [c.content for c in chunks(events, "status", "work")]
    assert proxy.cuts == 1 and status_reads(proxy) >= 4 and proxy.submissions() == ["POST /v1/runs HTTP/1.1"]
    assert [end.outcome for end in of_type(events, ev.RemoteRunEnded)] == ["completed"]


@ON_SQLITE_ONLY
async def test_a_lost_stream_whose_status_stays_unreadable_ends_the_visit_as_outcome_unknown_after_the_bound(
        keyed_gateway, hermes_model, store, tmp_path):
    hermes_model.will_pause_between(["Hello "], ["again."])
    run, events, proxy = await through_proxy(store, tmp_path, keyed_gateway, remote_flow("hermes-status-never"),
                                             cut_stream=True, failed_status_reads=10**6, status_retry_seconds=1.0)
    assert run.status is RunStatus.FAILED
    (end,) = of_type(events, ev.RemoteRunEnded)
    assert (end.outcome, end.reason) == ("unknown", "status_unreadable")
    error = of_type(events, ev.RunFailed)[0].error
    assert error.startswith("REMOTE_OUTCOME_UNKNOWN: node 'work' failed: ") and "could not be read for 1 s" in error
    assert str(proxy.port) not in error and "127.0.0.1" not in error
    assert status_reads(proxy) >= 2 and proxy.submissions() == ["POST /v1/runs HTTP/1.1"]
    assert summarize(events).remote_work_may_be_running


@ON_SQLITE_ONLY
async def test_a_repeat_safe_node_whose_gateway_runs_outcome_is_unknown_submits_its_prompt_once_more(
        keyed_gateway, hermes_model, store, tmp_path):
    hermes_model.will_pause_between(["Hello "], ["from the first run."])
    hermes_model.will_stream_text("Hello from the second run.")
    run, events, proxy = await through_proxy(store, tmp_path, keyed_gateway, remote_flow("hermes-repeat", repeatSafe=True),
                                             cut_stream=True, failed_status_reads=10**6, status_retry_seconds=1.0)
    statuses = [c.content for c in chunks(events, "status", "work")]
    assert run.status is RunStatus.SUCCEEDED, statuses
    assert of_type(events, ev.RunCompleted)[0].output["data"] == {"answer": "Hello from the second run."}
    assert [(e.attempt, e.outcome) for e in of_type(events, ev.RemoteRunEnded)] == [(1, "unknown"), (2, "completed")]
    assert len(proxy.submissions()) == 2
    assert any("the node declares repeatSafe, so the prompt is submitted again" in line for line in statuses)


@ON_SQLITE_ONLY
async def test_an_unreachable_gateways_address_is_in_no_error_a_client_reads(store, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "whatever-key-0123456789")
    port = free_port()
    async with services_on(store, tmp_path / "data", HermesGateway(
            id="test", base_url=f"http://127.0.0.1:{port}", api_key_env=KEY_ENV)) as services:
        run, events = await run_to_end(services, remote_flow("hermes-down"))
    assert run.status is RunStatus.FAILED
    shown = [of_type(events, ev.VisitFailed)[0].error, summarize(events).as_dict()["error"]]
    assert all("is unreachable" in text and str(port) not in text and "127.0.0.1" not in text for text in shown)


@ON_SQLITE_ONLY
async def test_an_internal_address_in_the_gateways_error_is_replaced_before_the_run_records_it(
        hermes_services, hermes_model):
    hermes_model.will_fail(401, "the key was revoked at http://10.9.8.7:8000/v1 (proxy 192.168.4.2:3128)",
                           "invalid_request_error")
    run, events = await run_to_end(hermes_services, remote_flow("hermes-internal-address"))
    error = of_type(events, ev.VisitFailed)[0].error
    assert run.status is RunStatus.FAILED and error.startswith("hermes run_failed: ")
    assert "10.9.8.7" not in error and "192.168.4.2" not in error


async def test_a_node_on_a_disabled_gateway_fails_saying_so_and_asks_the_gateway_nothing(
        keyed_gateway, hermes_model, tmp_path):
    async with services_on(f"sqlite:///{tmp_path / 'flowtrail.db'}", tmp_path / "data",
                           configured(keyed_gateway, enabled=False)) as services:
        run, events = await run_to_end(services, remote_flow("hermes-disabled"))
    assert run.status is RunStatus.FAILED and hermes_model.streamed == []
    assert of_type(events, ev.VisitFailed)[0].error == (
        "hermes gateway 'test' is disabled (enabled: false in FLOWTRAIL_HERMES_GATEWAYS)")
    assert of_type(events, ev.RemoteRunRequested) == []


@ON_SQLITE_ONLY
async def test_a_stream_that_ends_without_the_runs_end_on_a_gateway_that_forgot_the_run_fails_as_outcome_unknown(
        store, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "whatever-key-0123456789")
    fake = EndingGateway()
    await fake.start()
    try:
        async with services_on(store, tmp_path / "data", HermesGateway(
                id="test", base_url=f"http://127.0.0.1:{fake.port}", api_key_env=KEY_ENV)) as services:
            run, events = await run_to_end(services, remote_flow("hermes-incomplete"))
    finally:
        await fake.stop()
    assert run.status is RunStatus.FAILED
    error = of_type(events, ev.VisitFailed)[0].error
    assert error.startswith("REMOTE_OUTCOME_UNKNOWN: ") and "the gateway no longer knows the run" in error
    assert "it is not submitted again" in error and answer_text(events) == "Hal"
    assert [end.outcome for end in of_type(events, ev.RemoteRunEnded)] == ["unknown"]
    assert of_type(events, ev.RunFailed)[0].error.startswith("REMOTE_OUTCOME_UNKNOWN: node 'work' failed: ")


def approvals(events) -> list[dict]:
    """The approval requests our log copied."""
    return [json.loads(json.loads(c.content)["preview"]) for c in chunks(events, "tool_progress", "work")
            if c.tool_name == "hermes_remote:approval"]


@ON_SQLITE_ONLY
async def test_a_denied_approval_request_keeps_the_command_from_running(hermes_services, hermes_model, tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    hermes_model.will_run_command(f"rm -rf {victim}")
    hermes_model.will_stream_text("I was not allowed to delete it.")
    run, events = await run_to_end(hermes_services, remote_flow("hermes-deny"))
    statuses = [c.content for c in chunks(events, "status", "work")]
    assert run.status is RunStatus.SUCCEEDED, statuses
    assert victim.exists()
    assert [request["command"] for request in approvals(events)] == [f"rm -rf {victim}"]
    assert "hermes approval request answered 'deny' (auto_approve=False)" in statuses
    assert "BLOCKED" in json.dumps(hermes_model.streamed[1]["messages"][-1])


@ON_SQLITE_ONLY
@pytest.mark.hermes(auto_approve=True)
async def test_an_auto_approved_request_lets_the_command_run(hermes_services, hermes_model, tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    hermes_model.will_run_command(f"rm -rf {victim}")
    hermes_model.will_stream_text("Deleted.")
    run, events = await run_to_end(hermes_services, remote_flow("hermes-approve"))
    statuses = [c.content for c in chunks(events, "status", "work")]
    assert run.status is RunStatus.SUCCEEDED, statuses
    assert not victim.exists()
    assert "hermes approval request answered 'once' (auto_approve=True)" in statuses


def revisiting_flow(name: str) -> dict:
    """An AGENTIC run whose planner visits the remote agent `work` twice, then the output."""
    decisions = [[{"text": {"nextNodeId": "work", "reason": "again"}}]] * 2
    decisions = decisions + [[{"text": {"nextNodeId": "out", "reason": "answer"}}]]
    work = node("work", "agent", backend="hermes_remote", prompt="Greet {{who}}", systemPrompt="You are terse.")
    out = node("out", "output", outputs=[{"name": "answer", "value": "{{work.text}}"}])
    return workflow(name, [node("input", "userInput", inputs=[{"name": "who"}]), work, out], [], "AGENTIC", startNodeId="input",
                    planner={"model_id": "scripted", "prompt": "Greet twice.", "script": decisions})


def system_text(body: dict) -> str:
    return "\n".join(m["content"] for m in body["messages"] if m["role"] == "system")


@ON_SQLITE_ONLY
async def test_a_revisited_node_resumes_its_gateway_session_sending_the_history_itself(hermes_services, hermes_model):
    hermes_model.will_stream_text("Hello Ada!")
    hermes_model.will_stream_text("Hello again, Ada!")
    run, events = await run_to_end(hermes_services, revisiting_flow("hermes-revisit"))
    statuses = [c.content for c in chunks(events, "status", "work")]
    assert run.status is RunStatus.SUCCEEDED, statuses
    first, second = hermes_model.streamed
    assert "You are terse." in system_text(first) and "flowtrail" in system_text(first)
    assert "You are terse." not in system_text(second) and "flowtrail" in system_text(second)
    said = [(m["role"], without_context(m["content"])) for m in second["messages"] if m["role"] != "system"]
    assert said[-3:] == [("user", "Greet Ada"), ("assistant", "Hello Ada!"), ("user", "Greet Ada")]
    assert any(line.endswith("is new: starting it fresh") for line in statuses)
    assert any(line.endswith("resumed with 2 earlier message(s)") for line in statuses)


class RecordingSink:
    """What a visit gives a remote agent, keeping the chunks, status lines and gateway-run facts in lists."""

    def __init__(self) -> None:
        self.cancel_event = asyncio.Event()
        self.lines: list[tuple[str, str]] = []
        self.facts: list[tuple] = []
        self.handing_over = False

    async def requested(self, gateway_id: str, session_id: str, attempt: int) -> datetime:
        self.facts.append(("requested", attempt))
        return utcnow()

    async def accepted(self, attempt: int, remote_run_id: str) -> None:
        self.facts.append(("accepted", attempt))

    async def stop_requested(self, attempt: int, remote_run_id: str, reason: str) -> None:
        self.facts.append(("stop_requested", attempt))

    async def ended(self, end) -> None:
        self.facts.append(("ended", end.attempt, end.outcome))

    async def stream(self, kind: str, content: str, tool_name: str | None = None) -> None:
        self.lines.append((kind, content))

    async def status(self, text: str) -> None:
        self.lines.append(("status", text))

    def check_cancel(self) -> None:
        pass


async def test_a_session_the_gateway_no_longer_has_starts_fresh_with_the_system_prompt_again(keyed_gateway, hermes_model):
    sink = RecordingSink()
    session = f"flowtrail-test-{uuid.uuid4().hex}"
    agent = RemoteAgent(configured(keyed_gateway), keyed_gateway.key, sink, sink, session_id=session,
                        system_prompt="You are terse.")
    hermes_model.will_stream_text("One.")
    hermes_model.will_stream_text("Two.")
    assert await agent.answer("First") == "One."
    async with httpx.AsyncClient(base_url=keyed_gateway.base_url, headers={"Authorization": f"Bearer {keyed_gateway.key}"}) as client:
        assert (await client.delete(f"/api/sessions/{session}")).status_code == 200
    assert await agent.answer("Second") == "Two."
    first, second = hermes_model.streamed
    assert "You are terse." in system_text(first) and "You are terse." in system_text(second)
    assert [m["content"] for m in second["messages"] if m["role"] == "user"] == ["Second"]
    fresh = [text for kind, text in sink.lines if kind == "status" and text.endswith("starting it fresh")]
    assert len(fresh) == 2
    assert sink.facts == [("requested", 1), ("accepted", 1), ("ended", 1, "completed"),
                          ("requested", 2), ("accepted", 2), ("ended", 2, "completed")]


GREETING = [{"name": "greeting", "type": "string", "required": True, "description": "the greeting"}]


def structured_flow(name: str, node_type: str = "agent", **data) -> dict:
    """userInput -> a remote `work` node with declared outputs -> output of its whole data."""
    work = node("work", node_type, backend="hermes_remote", prompt="Greet {{who}}", reformat_model_id="scripted", **data)
    out = node("out", "output", outputs=[{"name": "result", "value": "{{work}}"}])
    return workflow(name, [node("input", "userInput", inputs=[{"name": "who"}]), work, out], [edge("input", "work"), edge("work", "out")])


@ON_SQLITE_ONLY
async def test_a_final_text_that_is_not_json_is_reformatted_by_a_plain_model_without_running_hermes_again(
        hermes_services, hermes_model):
    hermes_model.will_stream_text("Hello Ada, nice to meet you.")
    flow = structured_flow("hermes-reformat", outputs=GREETING,
                           script={"reformat": [[{"text": '{"greeting": "Hello Ada"}'}]]})
    run, events = await run_to_end(hermes_services, flow)
    statuses = [c.content for c in chunks(events, "status", "work")]
    assert run.status is RunStatus.SUCCEEDED, statuses
    assert of_type(events, ev.VisitCompleted)[1].output["data"]["greeting"] == "Hello Ada"
    assert len(hermes_model.streamed) == 1 and len(gateway_runs(events)) == 1
    assert any(line.endswith("re-formatting (1/2)") for line in statuses)
    prompt = without_context(hermes_model.streamed[0]["messages"][-1]["content"])
    assert prompt.startswith("Greet Ada") and '"greeting"' in prompt


@ON_SQLITE_ONLY
async def test_when_reformatting_fails_hermes_runs_again_in_the_same_session_told_what_was_wrong(
        hermes_services, hermes_model):
    hermes_model.will_stream_text("Hello Ada, nice to meet you.")
    hermes_model.will_stream_text('{"greeting": "Hello Ada"}')
    flow = structured_flow("hermes-rerun", outputs=GREETING, formatMaxRetries=1,
                           script={"reformat": [[{"text": "still prose"}]]})
    run, events = await run_to_end(hermes_services, flow)
    statuses = [c.content for c in chunks(events, "status", "work")]
    assert run.status is RunStatus.SUCCEEDED, statuses
    assert len(gateway_runs(events)) == 2 and len(hermes_model.streamed) == 2
    said = [(m["role"], m["content"]) for m in hermes_model.streamed[1]["messages"] if m["role"] != "system"]
    assert said[-2] == ("assistant", "Hello Ada, nice to meet you.")
    assert said[-1][1].startswith("Your answer did not pass validation: answer is not JSON")
    assert any(line.endswith("re-running the node (1/1)") for line in statuses)


@ON_SQLITE_ONLY
async def test_a_smart_action_on_hermes_chooses_one_of_the_listed_actions(hermes_services, hermes_model):
    hermes_model.will_stream_text('{"action": "approve", "reason": "it is fine"}')
    flow = structured_flow("hermes-action", "smartAction", actions=["approve", {"id": "reject", "description": "no"}])
    run, events = await run_to_end(hermes_services, flow)
    assert run.status is RunStatus.SUCCEEDED, [c.content for c in chunks(events, "status", "work")]
    data = of_type(events, ev.VisitCompleted)[1].output["data"]
    assert (data["action"], data["reason"]) == ("approve", "it is fine")
    assert "- reject: no" in hermes_model.streamed[0]["messages"][-1]["content"]


@ON_SQLITE_ONLY
async def test_a_smart_action_on_hermes_that_picks_an_unlisted_action_fails(hermes_services, hermes_model):
    hermes_model.will_stream_text('{"action": "escalate", "reason": "unsure"}')
    flow = structured_flow("hermes-bad-action", "smartAction", actions=["approve", "reject"], runtimeMaxRetries=0)
    run, events = await run_to_end(hermes_services, flow)
    assert run.status is RunStatus.FAILED
    assert "'escalate', which is not one of approve, reject" in of_type(events, ev.VisitFailed)[0].error


@pytest.mark.store
async def test_a_restart_during_a_hermes_visit_follows_its_gateway_run_to_its_end_and_submits_nothing_again(
        keyed_gateway, hermes_model, store, tmp_path):
    hermes_model.will_pause_between(["Hello "], ["after ", "the restart."])
    settings = engine_settings(store, tmp_path / "data", load_demos=False, hermes_gateways=(configured(keyed_gateway),))
    async with running(settings) as services:
        run_id = (await accepted_and_answering(services, hermes_model, "hermes-restart")).originator_id
        (interrupted,) = gateway_runs(await events_of(services, run_id))
    assert (await gateway_status(keyed_gateway, interrupted))["status"] == "running"
    hermes_model.open_gate()
    async with running(settings) as services:
        run = await wait_until(services, run_id, timeout=120)
        events = await events_of(services, run_id)
    statuses = [c.content for c in chunks(events, "status", "work")]
    assert run.status is RunStatus.SUCCEEDED, statuses
    assert any("taking up its gateway run where the log left it" in line for line in statuses)
    assert any(f"following hermes run {interrupted} to its end" in line for line in statuses)
    assert gateway_runs(events) == [interrupted] and len(hermes_model.streamed) == 1
    assert [(end.attempt, end.outcome) for end in of_type(events, ev.RemoteRunEnded)] == [(1, "completed")]
    assert of_type(events, ev.RunCompleted)[0].output["data"] == {"answer": "Hello after the restart."}


async def test_the_hermes_demo_is_published_only_when_a_gateway_is_configured(keyed_gateway, hermes_model, tmp_path):
    async with running(engine_settings(f"sqlite:///{tmp_path / 'plain.db'}", tmp_path / "plain")) as services:
        assert "demo-hermes" not in {entry.name for entry in services.catalogue.all()}
    settings = engine_settings(f"sqlite:///{tmp_path / 'flowtrail.db'}", tmp_path / "data",
                               hermes_gateways=(configured(keyed_gateway),))
    hermes_model.will_stream_text("Tides follow the moon (source: NOAA).")
    hermes_model.will_stream_text('{"action": "publish", "reason": "it answers the topic"}')
    async with running(settings) as services:
        run_id = await start(services, "demo-hermes", {"topic": "tides"})
        run = await wait_until(services, run_id, timeout=120)
        events = await events_of(services, run_id)
    assert run.status is RunStatus.SUCCEEDED, [c.content for c in chunks(events, "status")]
    assert of_type(events, ev.RunCompleted)[0].output["data"] == {
        "notes": "Tides follow the moon (source: NOAA).", "verdict": "publish", "reason": "it answers the topic"}


@ON_SQLITE_ONLY
async def test_a_gateway_whose_model_is_down_fails_the_visit_with_run_failed(hermes_services, hermes_model):
    hermes_model.will_fail(401, "the model's key was revoked", "invalid_request_error")
    run, events = await run_to_end(hermes_services, remote_flow("hermes-llm-down"))
    assert run.status is RunStatus.FAILED
    assert of_type(events, ev.VisitFailed)[0].error.startswith("hermes run_failed: ")


async def test_a_node_on_a_gateway_with_the_wrong_key_fails_before_submitting_anything(
        hermes_gateway, hermes_model, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "not-the-gateway-key-at-all")
    async with services_on(f"sqlite:///{tmp_path / 'flowtrail.db'}", tmp_path / "data",
                           configured(hermes_gateway)) as services:
        run, events = await run_to_end(services, remote_flow("hermes-wrong-key"))
    assert run.status is RunStatus.FAILED and hermes_model.streamed == []
    assert of_type(events, ev.VisitFailed)[0].error.startswith("hermes gateway 'test' is unauthorized: ")


def context_flow(name: str) -> dict:
    """userInput -> a scripted llm `draft` (thinking, text) -> a remote agent `work` -> output."""
    draft = node("draft", "llm", model_id="scripted", prompt="Draft about {{who}}",
                 script=[text_turn("Ada wrote the first program.", thinking="Recall Ada's notes on the engine.")])
    work = node("work", "agent", backend="hermes_remote", prompt="Polish the draft.")
    out = node("out", "output", outputs=[{"name": "answer", "value": "{{work.text}}"}])
    nodes = [node("input", "userInput", inputs=[{"name": "who"}]), draft, work, out]
    return workflow(name, nodes, [edge("input", "draft"), edge("draft", "work"), edge("work", "out")])


def section_of(prompt: str) -> dict:
    """The JSON of the context section a prompt carries."""
    body = prompt.split(OPEN + "\n", 1)[1].split("\n" + CLOSE, 1)[0]
    return json.loads(body)


@pytest.mark.store
async def test_a_remote_agent_gets_its_predecessors_context_in_its_prompt_and_no_context_token(
        hermes_services, hermes_model):
    hermes_model.will_pause_between(["Polished: "], ["Ada wrote it."])
    await hermes_services.catalogue.publish(context_flow("hermes-context"))
    run_id = await start(hermes_services, "hermes-context", {"who": "Ada"})
    while not hermes_model.streamed:
        await asyncio.sleep(0.05)
    live_tokens = len(hermes_services.tokens)
    hermes_model.open_gate()
    run = await wait_until(hermes_services, run_id, timeout=120)
    events = await events_of(hermes_services, run_id)
    assert run.status is RunStatus.SUCCEEDED, [c.content for c in chunks(events, "status")]
    prompt = hermes_model.streamed[0]["messages"][-1]["content"]
    assert prompt.endswith("Polish the draft.") and prompt.count(OPEN) == 1
    section = section_of(prompt)
    assert [v["output"]["nodeId"] for v in section["visits"]] == ["input", "draft"]
    draft = section["visits"][1]
    assert draft["output"]["data"] == {"text": "Ada wrote the first program."}
    assert draft["meta"]["thinking"] == "Recall Ada's notes on the engine."
    assert section["paths"]["nodeIds"] == ["input", "draft", "work"]
    assert live_tokens == 0 and not re.search(r"\b[0-9a-f]{48}\b", prompt) and run_id.hex not in prompt
    system = system_text(hermes_model.streamed[0])
    assert OPEN not in system and "Ada wrote the first program." not in system
    assert any(line.startswith("the prompt carries the context of earlier visits (")
               for line in [c.content for c in chunks(events, "status", "work")])


@ON_SQLITE_ONLY
async def test_with_context_query_switched_off_a_remote_agents_prompt_carries_no_context(
        keyed_gateway, hermes_model, store, tmp_path):
    hermes_model.will_stream_text("Polished.")
    settings = engine_settings(store, tmp_path / "data", load_demos=False, hermes_gateways=(configured(keyed_gateway),))
    settings = replace(settings, context=replace(settings.context, enabled=False))
    async with running(settings) as services:
        run, _ = await run_to_end(services, context_flow("hermes-no-context"))
    assert run.status is RunStatus.SUCCEEDED
    assert hermes_model.streamed[0]["messages"][-1]["content"] == "Polish the draft."
