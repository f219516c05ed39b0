"""Webhooks without the network: which URLs are accepted, the retry rule, the delivery decisions on an ended run,
the Standard Webhooks signature (checked by the `standardwebhooks` package), the body, erasure and GET run's fold."""

from __future__ import annotations

import base64
import time

import msgspec
import pytest
from standardwebhooks import Webhook

from domain import events as ev
from domain.erasure import skeleton_of
from domain.errors import IllegalTransition
from domain.run import fold
from domain.urls import shown_url
from domain.webhooks import (
    InvalidWebhook,
    abandon_delivery,
    backoff_seconds,
    check_webhook_url,
    is_retried,
    record_attempt,
    trigger_of,
    webhook_id,
)
from engine.config import SettingsError
from engine.settings import Settings
from engine.webhooks.delivery import resolves_privately
from engine.webhooks.payload import webhook_body
from engine.webhooks.signing import parse_secret, signed_headers
from projections.sse import produces_sse_message
from projections.summary import summarize
from tests.unit.builders import RUN_ID, T0, RunLog

SECRET = "whsec_" + base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()
URL = "https://user:pw@hooks.example.com:8443/in/flowtrail?token=abc#frag"


def ended_log() -> RunLog:
    return RunLog().created(webhook=URL).started().finish({"r": 1})


def attempt(run, position: int, number: int, status: int | None, error=None):
    return record_attempt(run, T0, webhook_id=webhook_id(RUN_ID.hex, position, URL), url=shown_url(URL),
                          trigger="run.completed", trigger_position=position, attempt=number, status_code=status,
                          error=error, duration_ms=12.345)


def test_a_webhook_id_is_the_same_for_the_same_trigger_and_url_and_differs_otherwise():
    assert webhook_id(RUN_ID.hex, 5, URL) == webhook_id(RUN_ID.hex, 5, URL)
    assert len({webhook_id(RUN_ID.hex, 5, URL), webhook_id(RUN_ID.hex, 6, URL), webhook_id(RUN_ID.hex, 5, "x")}) == 3
    assert webhook_id(RUN_ID.hex, 5, URL).startswith("msg_")


def test_the_url_a_history_shows_has_no_credentials_query_or_fragment():
    assert shown_url(URL) == "https://hooks.example.com:8443/in/flowtrail"


@pytest.mark.parametrize("url", ["https://hooks.example.com/x", "https://93.184.216.34/x", "https://h.example:8443"])
def test_a_public_https_url_is_accepted_by_default(url):
    assert check_webhook_url(url, allow_http=False, allow_private=False) == url


@pytest.mark.parametrize("url", [
    "http://hooks.example.com/x", "https://127.0.0.1/x", "https://localhost/x", "https://api.localhost/x",
    "https://10.0.0.8/x", "https://192.168.1.1/x", "https://169.254.169.254/latest", "https://[::1]/x",
    "https://[fd00::1]/x", "https://0.0.0.0/x", "ftp://hooks.example.com", "hooks.example.com/x", "https://",
    "https://h.example:99999/", "https://[::1/x", "https://h.example/" + "x" * 2100,
])
def test_a_url_that_is_not_public_https_is_refused_by_default(url):
    with pytest.raises(InvalidWebhook):
        check_webhook_url(url, allow_http=False, allow_private=False)


def test_the_operator_may_allow_plain_http_and_loopback():
    assert check_webhook_url("http://127.0.0.1:9/x", allow_http=True, allow_private=True)
    with pytest.raises(InvalidWebhook):
        check_webhook_url("http://127.0.0.1:9/x", allow_http=True, allow_private=False)


@pytest.mark.parametrize(("status", "retried"), [
    (None, True), (500, True), (502, True), (503, True), (408, True), (429, True),
    (301, False), (302, False), (307, False), (400, False), (401, False), (404, False), (410, False),
])
def test_no_answer_5xx_408_and_429_are_retried_and_redirects_and_other_4xx_are_not(status, retried):
    assert is_retried(status) is retried


def test_the_wait_between_attempts_doubles_up_to_its_longest():
    assert [backoff_seconds(n, 5, 60) for n in range(1, 7)] == [5, 10, 20, 40, 60, 60]
    assert backoff_seconds(10_000, 5, 60) == 60


def test_an_ended_run_takes_attempts_until_one_is_delivered_and_nothing_after():
    log = ended_log()
    run = fold(log.events)
    assert run is not None and run.status.is_terminal
    end = len(log.events)
    failed = attempt(run, end, 1, 503)
    run = fold([*log.events, failed])
    delivered = attempt(run, end, 2, 204)
    run = fold([*log.events, failed, delivered])
    assert (failed.delivered, delivered.delivered, delivered.originator_version) == (False, True, end + 2)
    assert run is not None and run.status.is_terminal and delivered.webhook_id in run.settled_webhooks
    with pytest.raises(IllegalTransition):
        attempt(run, end, 3, 200)
    with pytest.raises(IllegalTransition):
        abandon_delivery(run, T0, webhook_id=delivered.webhook_id, url="u", trigger="run.completed",
                         trigger_position=end, attempts=2, reason="time bound passed")


def test_an_attempt_for_a_position_the_run_does_not_have_is_refused():
    run = fold(ended_log().events)
    with pytest.raises(IllegalTransition):
        attempt(run, 99, 1, 200)


def test_the_four_triggers_are_the_ends_and_the_pause():
    log = RunLog().created().started()
    visit = log.visit("a")
    log.ask(visit, "c1", "Which?").finish().fail_run("x")
    assert [trigger_of(e) for e in log.events if trigger_of(e)] == ["run.waiting", "run.completed", "run.failed"]


def test_webhook_events_change_no_status_and_reach_no_stream_client():
    log = ended_log()
    run = fold(log.events)
    events = [*log.events, attempt(run, len(log.events), 1, 200)]
    summary = summarize(events)
    assert summary.external_status == "SUCCESS"
    assert summary.last_sse_id == len(log.events)
    assert not produces_sse_message(events[-1])
    [view] = summary.webhooks.views()
    assert (view.state, view.attempts, view.last_status_code, view.url) == (
        "DELIVERED", 1, 200, "https://hooks.example.com:8443/in/flowtrail")


def test_erasing_a_run_removes_its_webhook_url_and_keeps_the_delivery_records():
    log = ended_log()
    run = fold(log.events)
    created = msgspec.json.decode(skeleton_of(msgspec.json.encode(log.events[0])))
    recorded = attempt(run, len(log.events), 1, 200)
    assert created["webhook"] is None
    assert skeleton_of(msgspec.json.encode(recorded)) == msgspec.json.encode(recorded)


def test_a_signature_made_here_is_verified_by_the_standardwebhooks_package():
    body = b'{"type":"run.completed","data":{}}'
    headers = signed_headers(parse_secret("S", SECRET), "msg_1", int(time.time()), body)
    assert Webhook(SECRET).verify(body, headers) == {"type": "run.completed", "data": {}}
    tampered = {**headers, "webhook-id": "msg_2"}
    with pytest.raises(Exception, match="signature"):
        Webhook(SECRET).verify(body, tampered)


@pytest.mark.parametrize("value", ["whsec_", "whsec_!!!", "whsec_" + base64.b64encode(b"short").decode()])
def test_a_secret_that_is_not_a_signing_secret_is_refused_without_being_named(value):
    with pytest.raises(SettingsError) as refused:
        parse_secret("FLOWTRAIL_WEBHOOK_SECRET", value)
    assert "FLOWTRAIL_WEBHOOK_SECRET" in str(refused.value) and (value not in str(refused.value) or value == "whsec_")


def test_a_service_with_a_malformed_secret_does_not_start_and_another_variable_may_hold_it():
    with pytest.raises(SettingsError, match="FLOWTRAIL_WEBHOOK_SECRET"):
        Settings.from_env({"FLOWTRAIL_WEBHOOK_SECRET": "not-a-secret"})
    settings = Settings.from_env({"FLOWTRAIL_WEBHOOKS_SECRET_ENV": "HOOK_KEY", "HOOK_KEY": SECRET})
    assert settings.webhooks.secret_env == "HOOK_KEY"


def test_the_body_names_the_run_its_status_its_code_and_its_links_and_no_content():
    log = RunLog().created(variables={"topic": "secret plans"}).started().fail_run("MODEL_UNAVAILABLE: down")
    created, failed = log.events[0], log.events[-1]
    assert isinstance(created, ev.RunCreated)
    body = msgspec.json.decode(webhook_body("https://flow.example", created, "run.failed", failed))
    assert body["type"] == "run.failed"
    assert body["data"]["status"] == "FAILED" and body["data"]["errorCode"] == "MODEL_UNAVAILABLE"
    assert body["data"]["links"]["events"] == f"https://flow.example/api/v1/runs/{RUN_ID.hex}/events"
    assert "secret plans" not in str(body) and "down" not in str(body)


async def test_a_host_that_resolves_to_loopback_counts_as_private_and_a_public_address_does_not():
    assert await resolves_privately("https://localhost/x")
    assert await resolves_privately("https://127.0.0.1/x")
    assert not await resolves_privately("https://93.184.216.34/x")
