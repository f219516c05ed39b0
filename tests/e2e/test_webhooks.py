"""Signed webhooks, end to end: a real server process on each store sends them to a real receiver on loopback, and
each one is verified with the `standardwebhooks` package; attempts and outcomes are read back from `GET run`."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from standardwebhooks import Webhook

from tests.fakes.webhook_receiver import Received, Reply, WebhookReceiver
from tests.support.killable import KillableServer

pytestmark = pytest.mark.store

SECRET = "whsec_" + base64.b64encode(b"flowtrail-webhook-test-secret!!!").decode()
SECRET_BYTES = SECRET.removeprefix("whsec_")
LOOPBACK = {
    "FLOWTRAIL_WEBHOOK_SECRET": SECRET,
    "FLOWTRAIL_WEBHOOKS_ALLOW_HTTP": "true",
    "FLOWTRAIL_WEBHOOKS_ALLOW_PRIVATE": "true",
    "FLOWTRAIL_WEBHOOKS_TIMEOUT_SECONDS": "1",
    "FLOWTRAIL_WEBHOOKS_RETRY_FIRST_SECONDS": "0.2",
    "FLOWTRAIL_WEBHOOKS_RETRY_MAX_SECONDS": "0.5",
    "FLOWTRAIL_WEBHOOKS_DELIVERY_SECONDS": "60",
    "FLOWTRAIL_LOAD_DEMOS": "true",
    "FLOWTRAIL_WORKER_HEARTBEAT_SECONDS": "0.5",
    "FLOWTRAIL_WORKER_STALL_SECONDS": "2",
}
"""A service that may send to the receiver (plain http on loopback), with a short retry schedule."""
SETTLE_SECONDS = 40


@contextlib.asynccontextmanager
async def serving(store: str, tmp_path: Path, **env: str) -> AsyncIterator[KillableServer]:
    server = KillableServer(store, tmp_path / "data", **{**LOOPBACK, **env})
    server.launch()
    await server.ready()
    try:
        yield server
    finally:
        await server.stop()


@contextlib.asynccontextmanager
async def receiving(*script: Reply, start: bool = True) -> AsyncIterator[WebhookReceiver]:
    receiver = WebhookReceiver(script=list(script))
    if start:
        await receiver.start()
    try:
        yield receiver
    finally:
        await receiver.stop()


async def ended_run(client: httpx.AsyncClient, webhook: str | None, workflow: str = "demo-report") -> str:
    body: dict[str, Any] = {"variables": {"topic": "tides"}}
    if webhook is not None:
        body["webhook"] = webhook
    created = await client.post(f"/api/v1/workflows/{workflow}/runs", json=body)
    assert created.status_code == 201, created.text
    run_id: str = created.json()["data"]["runId"]
    assert (await client.post(f"/api/v1/workflows/{workflow}/runs/{run_id}/start")).status_code == 200
    return run_id


async def ended(client: httpx.AsyncClient, run_id: str) -> None:
    """Wait until the run has ended."""
    async def over() -> None:
        while (await run_view(client, run_id))["completedAt"] is None:
            await asyncio.sleep(0.05)
    await asyncio.wait_for(over(), SETTLE_SECONDS)


async def run_view(client: httpx.AsyncClient, run_id: str, workflow: str = "demo-report") -> dict[str, Any]:
    answer = await client.get(f"/api/v1/workflows/{workflow}/runs/{run_id}")
    assert answer.status_code == 200, answer.text
    view: dict[str, Any] = answer.json()["data"]
    return view


async def deliveries(client: httpx.AsyncClient, run_id: str, count: int = 1, workflow: str = "demo-report",
                     settled: bool = True) -> list[dict[str, Any]]:
    """The run's `webhooks` once it lists `count` deliveries (all settled, unless not asked)."""
    async def listed() -> list[dict[str, Any]]:
        while True:
            found: list[dict[str, Any]] = (await run_view(client, run_id, workflow)).get("webhooks", [])
            if len(found) >= count and (not settled or all(d["state"] != "PENDING" for d in found)):
                return found
            await asyncio.sleep(0.1)
    return await asyncio.wait_for(listed(), SETTLE_SECONDS)


async def attempted(client: httpx.AsyncClient, run_id: str, attempts: int) -> dict[str, Any]:
    """The run's first delivery once it had `attempts` attempts."""
    async def enough() -> dict[str, Any]:
        while True:
            found = (await run_view(client, run_id)).get("webhooks", [])
            if found and found[0]["attempts"] >= attempts:
                return dict(found[0])
            await asyncio.sleep(0.05)
    return await asyncio.wait_for(enough(), SETTLE_SECONDS)


def verified(request: Received) -> dict[str, Any]:
    """The body of a request whose Standard Webhooks signature holds (WebhookVerificationError otherwise)."""
    payload: dict[str, Any] = Webhook(SECRET).verify(request.body, request.headers)
    return payload


async def stored_events(client: httpx.AsyncClient, run_id: str) -> list[dict[str, Any]]:
    answer = await client.get(f"/api/v1/runs/{run_id}/events")
    assert answer.status_code == 200, answer.text
    return [json.loads(line) for line in answer.text.splitlines() if line.strip()]


async def test_a_run_that_ends_posts_one_signed_webhook_naming_the_run_and_its_links(store, tmp_path):
    async with receiving() as receiver, serving(store, tmp_path) as server, server.client() as client:
        run_id = await ended_run(client, receiver.url())
        [delivery] = await deliveries(client, run_id)
        [request] = receiver.received
        payload = verified(request)
        assert payload["type"] == "run.completed"
        assert payload["data"]["runId"] == run_id
        assert (payload["data"]["workflowName"], payload["data"]["status"]) == ("demo-report", "SUCCESS")
        assert payload["data"]["errorCode"] is None
        assert payload["data"]["links"]["run"] == f"{server.base_url}/api/v1/workflows/demo-report/runs/{run_id}"
        assert payload["data"]["links"]["viewer"] == f"{server.base_url}/ui/runs/{run_id}"
        assert delivery["webhookId"] == request.headers["webhook-id"]
        assert (delivery["state"], delivery["attempts"], delivery["lastStatusCode"]) == ("DELIVERED", 1, 200)
        assert delivery["url"] == receiver.url()
        events = await stored_events(client, run_id)
        assert [e["type"] for e in events][-2:] == ["RunCompleted", "WebhookAttempted"]
        assert (await run_view(client, run_id))["status"] == "SUCCESS"
        metrics = (await client.get("/metrics")).text
        assert 'flowtrail_webhook_deliveries_total{outcome="delivered"} 1.0' in metrics
        assert 'flowtrail_webhook_attempts_total{outcome="2xx"} 1.0' in metrics


async def test_500_500_then_200_is_delivered_on_the_third_attempt_under_one_webhook_id(store, tmp_path):
    async with receiving(Reply(500), Reply(500)) as receiver, serving(store, tmp_path) as server, \
            server.client() as client:
        run_id = await ended_run(client, receiver.url())
        [delivery] = await deliveries(client, run_id)
        assert (delivery["state"], delivery["attempts"], delivery["lastStatusCode"]) == ("DELIVERED", 3, 200)
        assert len({request.headers["webhook-id"] for request in receiver.received}) == 1
        assert len({verified(request)["data"]["runId"] for request in receiver.received}) == 1
        assert len({request.body for request in receiver.received}) == 1
        attempts = [e for e in await stored_events(client, run_id) if e["type"] == "WebhookAttempted"]
        assert [(a["attempt"], a["status_code"], a["delivered"]) for a in attempts] == [
            (1, 500, False), (2, 500, False), (3, 200, True)]


async def test_a_receiver_that_is_down_gets_the_webhook_once_it_is_up(store, tmp_path):
    async with receiving(start=False) as receiver, serving(store, tmp_path) as server, server.client() as client:
        run_id = await ended_run(client, receiver.url())
        down = await attempted(client, run_id, 4)
        assert (down["state"], down["lastError"], down["lastStatusCode"]) == ("PENDING", "refused", None)
        await receiver.start()
        [delivery] = await deliveries(client, run_id)
        assert delivery["state"] == "DELIVERED" and delivery["attempts"] > 4
        assert verified(receiver.received[0])["type"] == "run.completed"


async def test_a_server_killed_between_two_attempts_makes_the_next_after_its_restart_with_the_same_id(store, tmp_path):
    async with receiving(Reply(503)) as receiver, serving(
        store, tmp_path, FLOWTRAIL_WEBHOOKS_RETRY_FIRST_SECONDS="2",
    ) as server:
        async with server.client() as client:
            run_id = await ended_run(client, receiver.url())
            await attempted(client, run_id, 1)
        server.kill()
        server.launch()
        await server.ready()
        async with server.client() as client:
            [delivery] = await deliveries(client, run_id)
        assert (delivery["state"], delivery["lastStatusCode"]) == ("DELIVERED", 200)
        assert delivery["attempts"] >= 2
        assert len({request.headers["webhook-id"] for request in receiver.received}) == 1
        for request in receiver.received:
            verified(request)


async def test_a_slow_receiver_is_cut_at_the_timeout_and_tried_again(store, tmp_path):
    async with receiving(Reply(200, delay=3)) as receiver, serving(store, tmp_path) as server, \
            server.client() as client:
        run_id = await ended_run(client, receiver.url())
        [delivery] = await deliveries(client, run_id)
        attempts = [e for e in await stored_events(client, run_id) if e["type"] == "WebhookAttempted"]
        assert [(a["error"], a["status_code"]) for a in attempts] == [("timeout", None), ("", 200)]
        assert delivery["state"] == "DELIVERED"


@pytest.mark.parametrize("status", [302, 404])
async def test_a_redirect_or_a_refusal_ends_the_delivery_at_once_and_no_redirect_is_followed(store, tmp_path, status):
    async with receiving() as receiver, serving(store, tmp_path) as server, server.client() as client:
        receiver.script.append(Reply(status, location=receiver.url("/elsewhere")))
        run_id = await ended_run(client, receiver.url())
        [delivery] = await deliveries(client, run_id)
        assert (delivery["state"], delivery["attempts"], delivery["lastStatusCode"]) == ("ABANDONED", 1, status)
        assert receiver.to("/elsewhere") == []
        assert len(receiver.received) == 1


async def test_a_delivery_that_never_succeeds_is_abandoned_when_its_time_bound_passes(store, tmp_path):
    async with receiving(*[Reply(500)] * 100) as receiver, serving(
        store, tmp_path, FLOWTRAIL_WEBHOOKS_DELIVERY_SECONDS="2",
    ) as server, server.client() as client:
        run_id = await ended_run(client, receiver.url())
        [delivery] = await deliveries(client, run_id)
        assert (delivery["state"], delivery["abandonedReason"]) == ("ABANDONED", "time bound passed")
        assert delivery["attempts"] == len(receiver.received) >= 2
        assert (await run_view(client, run_id))["status"] == "SUCCESS"


async def test_a_pause_for_an_answer_and_the_end_each_post_a_webhook(store, tmp_path):
    async with receiving() as receiver, serving(store, tmp_path) as server, server.client() as client:
        run_id = await ended_run(client, receiver.url(), workflow="demo-clarify")
        [waiting] = await deliveries(client, run_id, workflow="demo-clarify")
        payload = verified(receiver.received[0])
        assert (payload["type"], payload["data"]["waitingForAnswer"]) == ("run.waiting", True)
        view = await run_view(client, run_id, "demo-clarify")
        assert view["waitingForAnswer"] is True
        assert payload["data"]["clarifyId"] == view["currentPause"]["clarifyId"]
        answered = await client.post(f"/api/v1/runs/{run_id}/resume", json={
            "clarifyId": view["currentPause"]["clarifyId"], "answer": view["currentPause"]["choices"][0]})
        assert answered.status_code == 200, answered.text
        found = await deliveries(client, run_id, count=2, workflow="demo-clarify")
        assert [d["trigger"] for d in found] == ["run.waiting", "run.completed"]
        assert waiting["state"] == "DELIVERED"
        assert verified(receiver.received[1])["data"]["status"] == "SUCCESS"


@pytest.mark.parametrize("webhook", [
    "http://hooks.example.com/x", "https://127.0.0.1/x", "https://10.1.2.3/x", "https://localhost/x",
    "https://[::1]/x", "ftp://hooks.example.com/x", "not a url", "https://", "https://h.example:99999/x",
])
async def test_a_webhook_url_the_service_may_not_send_to_is_refused_and_nothing_is_appended(store, tmp_path, webhook):
    async with serving(store, tmp_path, FLOWTRAIL_WEBHOOKS_ALLOW_HTTP="false",
                       FLOWTRAIL_WEBHOOKS_ALLOW_PRIVATE="false") as server, server.client() as client:
        refused = await client.post("/api/v1/workflows/demo-report/runs",
                                    json={"variables": {"topic": "tides"}, "webhook": webhook})
        assert refused.status_code == 400, refused.text
        assert refused.json()["code"] == "VALIDATION_FAILED"
        assert "webhook" in refused.json()["message"]
        listing = await client.get("/api/v1/workflows/demo-report/runs")
        assert listing.json()["data"]["items"] == []
        accepted = await client.post("/api/v1/workflows/demo-report/runs",
                                     json={"variables": {"topic": "tides"}, "webhook": "https://hooks.example.com/x"})
        assert accepted.status_code == 201, accepted.text


async def test_a_service_without_a_signing_secret_refuses_a_webhook(store, tmp_path):
    async with serving(store, tmp_path, FLOWTRAIL_WEBHOOK_SECRET="") as server, server.client() as client:
        refused = await client.post("/api/v1/workflows/demo-report/runs",
                                    json={"variables": {"topic": "tides"}, "webhook": "https://hooks.example.com/x"})
        assert (refused.status_code, refused.json()["code"]) == (400, "VALIDATION_FAILED")


async def test_the_signing_secret_reaches_neither_the_log_nor_the_store(store, tmp_path):
    async with receiving(Reply(500)) as receiver, serving(store, tmp_path, FLOWTRAIL_LOG_LEVEL="DEBUG") as server, \
            server.client() as client:
        run_id = await ended_run(client, receiver.url("/hook?token=t0ken"))
        [delivery] = await deliveries(client, run_id)
        exported = (await client.get(f"/api/v1/runs/{run_id}/events")).text
        view = json.dumps(await run_view(client, run_id))
    assert delivery["url"] == receiver.url("/hook")
    for secret in (SECRET, SECRET_BYTES):
        assert secret not in server.log()
        assert secret not in exported
    assert "t0ken" not in view and "t0ken" not in server.log()
    database = tmp_path / "data" / "flowtrail.db"
    if database.exists():
        assert SECRET_BYTES.encode() not in database.read_bytes()


async def test_key_subscriptions_follow_a_reload_of_the_key_file(store, tmp_path):
    keys_file = tmp_path / "keys.json"
    key = {"key": "test-key-all", "id": "all"}
    keys_file.write_text(json.dumps([key]))
    async with receiving() as receiver, serving(
        store, tmp_path, FLOWTRAIL_API_KEYS="", FLOWTRAIL_API_KEYS_FILE=str(keys_file),
        FLOWTRAIL_API_KEYS_FILE_POLL_SECONDS="0.2",
    ) as server, server.client() as client:
        before = await ended_run(client, None)
        await ended(client, before)
        keys_file.write_text(json.dumps([{**key, "webhooks": [receiver.url("/ops")]}]))
        await server.log_says("API keys reloaded", more_than=0)
        after = await ended_run(client, receiver.url("/own"))
        found = await deliveries(client, after, count=2)
        assert {d["url"] for d in found} == {receiver.url("/own"), receiver.url("/ops")}
        assert all(d["state"] == "DELIVERED" for d in found)
        assert {verified(r)["data"]["runId"] for r in receiver.received} == {after}
        assert "webhooks" not in await run_view(client, before)
