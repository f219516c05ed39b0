"""GET /runs/{runId}/timeline: each visit's start, end, waits and tokens, the run's tokens, costs where priced."""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path

from engine.llm.config import ModelPrice
from tests.support.engine_runs import engine_settings
from tests.support.server import RunningServer

KEY = "test-key-all"
PRICE = ModelPrice(model="scripted", input_per_1k=2.0, output_per_1k=8.0, currency="EUR")


def ms_between(start: str, end: str) -> float:
    """Milliseconds between two of the answer's ISO times (they are cut to the millisecond: +-1 of the exact span)."""
    return (datetime.fromisoformat(end.replace("Z", "+00:00")) - datetime.fromisoformat(start.replace("Z", "+00:00"))
            ).total_seconds() * 1000


async def finished(server: RunningServer, workflow: str, **variables: str) -> str:
    async with server.client(key=KEY) as http:
        run_id = (await http.post(f"/api/v1/workflows/{workflow}/runs", json={"variables": variables})).json()["data"]["runId"]
        await http.post(f"/api/v1/workflows/{workflow}/runs/{run_id}/start")
        await http.get(f"/api/v1/workflows/{workflow}/runs/{run_id}/stream", timeout=60)
    return run_id


async def test_a_finished_run_has_each_visit_in_card_order_with_its_times_tokens_and_priced_cost(
    store: str, tmp_path: Path
) -> None:
    server = await RunningServer(engine_settings(store, tmp_path / "data", model_prices=(PRICE,))).start()
    try:
        run_id = await finished(server, "demo-report", topic="tides")
        async with server.client(key=KEY) as http:
            timeline = (await http.get(f"/api/v1/runs/{run_id}/timeline")).json()["data"]
            run = (await http.get(f"/api/v1/workflows/demo-report/runs/{run_id}")).json()["data"]
    finally:
        await server.stop()

    assert [v["nodeId"] for v in timeline["visits"]] == [n["nodeId"] for n in run["nodes"]]
    for visit in timeline["visits"]:
        assert visit["status"] == "SUCCESS" and visit["waitingMs"] == 0 and visit["waits"] == []
        assert abs(visit["durationMs"] - ms_between(visit["startedAt"], visit["completedAt"])) <= 1
    usage = timeline["usage"]
    assert (usage["promptTokens"], usage["completionTokens"]) == (run["usage"]["promptTokens"], run["usage"]["completionTokens"])
    assert usage["currency"] == "EUR"
    assert usage["cost"] == round(usage["promptTokens"] * 0.002 + usage["completionTokens"] * 0.008, 6)
    research = next(v for v in timeline["visits"] if v["nodeId"] == "research")
    assert research["models"] == ["scripted"] and research["usage"]["promptTokens"] > 0
    assert sum(v["usage"]["promptTokens"] for v in timeline["visits"]) == usage["promptTokens"]
    assert timeline["startedAt"] == run["startedAt"] and timeline["completedAt"] == run["completedAt"]


async def test_a_visit_that_waited_for_an_answer_counts_the_wait_and_without_prices_there_is_no_cost(
    store: str, tmp_path: Path
) -> None:
    server = await RunningServer(engine_settings(store, tmp_path / "data")).start()
    try:
        async with server.client(key=KEY) as http:
            created = await http.post("/api/v1/workflows/demo-clarify/runs", json={"variables": {"topic": "tides"}})
            run_id = created.json()["data"]["runId"]
            await http.post(f"/api/v1/workflows/demo-clarify/runs/{run_id}/start")
            for _ in range(400):
                pause = (await http.get(f"/api/v1/runs/{run_id}/state")).json()["data"]["currentPause"]
                if pause is not None:
                    break
                await asyncio.sleep(0.02)
            waiting = (await http.get(f"/api/v1/runs/{run_id}/timeline")).json()["data"]
            await asyncio.sleep(0.05)
            await http.post(f"/api/v1/runs/{run_id}/resume", json={"clarifyId": pause["clarifyId"], "answer": "a short paragraph"})
            await http.get(f"/api/v1/workflows/demo-clarify/runs/{run_id}/stream", timeout=60)
            ended = (await http.get(f"/api/v1/runs/{run_id}/timeline")).json()["data"]
    finally:
        await server.stop()

    asking = next(v for v in waiting["visits"] if v["nodeId"] == "ask")
    assert asking["status"] == "RUNNING" and asking["completedAt"] is None and waiting["completedAt"] is None
    assert asking["waits"][0]["answeredAt"] is None and asking["waitingMs"] >= 0
    ask = next(v for v in ended["visits"] if v["nodeId"] == "ask")
    wait = ask["waits"][0]
    assert wait["answeredAt"] is not None
    assert abs(ask["waitingMs"] - ms_between(wait["askedAt"], wait["answeredAt"])) <= 1
    assert ask["waitingMs"] >= 50
    assert ask["durationMs"] >= ask["waitingMs"]
    assert ended["usage"]["cost"] is None and ended["usage"]["currency"] is None


async def test_the_timeline_of_an_unknown_run_is_not_found(store: str, tmp_path: Path) -> None:
    server = await RunningServer(engine_settings(store, tmp_path / "data")).start()
    try:
        async with server.client(key=KEY) as http:
            missing = await http.get("/api/v1/runs/0123456789abcdef0123456789abcdef/timeline")
            malformed = await http.get("/api/v1/runs/not-a-run/timeline")
    finally:
        await server.stop()
    assert (missing.status_code, missing.json()["code"]) == (404, "RUN_NOT_FOUND")
    assert malformed.status_code in (400, 404)
