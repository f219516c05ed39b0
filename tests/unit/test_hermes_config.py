"""FLOWTRAIL_HERMES_GATEWAYS: a strict JSON list; keys only by environment variable; base URLs without surprises."""

from __future__ import annotations

import json

import pytest

from engine.execution.errors import VisitFailure
from engine.execution.remote import usable_gateway
from engine.hermes.agent import history_rows, session_id_for
from engine.hermes.events import FINAL_TEXT, chunk_for
from engine.hermes.gateways import HermesGateway, parse_hermes_gateways
from engine.hermes.probe import missing_capabilities, probe, select_gateway


def gateways(*items: dict) -> str:
    return json.dumps(list(items))


def test_a_gateway_takes_its_defaults_from_the_seed():
    (gateway,) = parse_hermes_gateways(gateways({"id": "uni", "base_url": "http://hermes-uni:8642"}))
    assert (gateway.idle_timeout_seconds, gateway.auto_approve, gateway.api_key_env) == (
        600.0, False, "FLOWTRAIL_HERMES_API_KEY")


def test_no_variable_means_no_gateway():
    assert parse_hermes_gateways(None) == () and parse_hermes_gateways("  ") == ()


def test_an_inline_api_key_is_refused_as_an_unknown_field_naming_the_accepted_ones():
    with pytest.raises(SystemExit) as refused:
        parse_hermes_gateways(gateways({"id": "uni", "base_url": "http://h:1", "api_key": "secret-value"}))
    assert "unknown field `api_key`" in str(refused.value) and "api_key_env" in str(refused.value)


@pytest.mark.parametrize("url", [
    "ftp://h:1", "http://user:pw@h:1", "http://h:1/?x=1", "http://h:1/#top", "http://h:1/v1", "hermes:8642",
    "http://h:1/p/", "http://h:1/p/a/b",
])
def test_a_base_url_that_is_not_plain_http_is_refused(url):
    with pytest.raises(SystemExit, match="base_url"):
        parse_hermes_gateways(gateways({"id": "uni", "base_url": url}))


@pytest.mark.parametrize("url", ["http://h:1", "https://h/", "http://h:1/p/research", "http://h:1/p/research/"])
def test_a_base_url_may_carry_a_profile_prefix(url):
    assert parse_hermes_gateways(gateways({"id": "uni", "base_url": url}))[0].base_url == url


def test_two_gateways_with_one_id_are_refused():
    with pytest.raises(SystemExit, match="share the id 'uni'"):
        parse_hermes_gateways(gateways({"id": "uni", "base_url": "http://a:1"}, {"id": "uni", "base_url": "http://b:1"}))


def test_a_node_naming_no_gateway_gets_the_only_one_and_otherwise_none():
    one, two = HermesGateway("a", "http://a:1"), HermesGateway("b", "http://b:1")
    assert select_gateway([one], None) is one and select_gateway([one, two], None) is None
    assert select_gateway([one, two], "b") is two and select_gateway([one], "zz") is None


def test_capabilities_without_a_required_feature_are_incompatible_naming_it():
    answer = {"object": "hermes.api_server.capabilities",
              "features": {"run_submission": True, "run_events_sse": True, "run_stop": True,
                           "session_resources": True}}
    assert missing_capabilities(answer) == ["run_approval_response"]
    assert missing_capabilities({"object": "something.else"}) == ["object 'hermes.api_server.capabilities'"]


def test_history_keeps_the_last_forty_non_empty_user_and_assistant_rows():
    rows = [{"role": "tool", "content": "x"}, {"role": "assistant", "content": ""}]
    rows += [{"role": "user" if i % 2 else "assistant", "content": f"m{i}", "id": i} for i in range(50)]
    kept = history_rows(rows)
    assert len(kept) == 40 and kept[-1] == {"role": "user", "content": "m49"}


def test_each_node_of_each_run_has_its_own_session():
    from uuid import uuid4

    run = uuid4()
    assert session_id_for(run, "a") == session_id_for(run, "a") != session_id_for(run, "b")
    assert session_id_for(run, "a") != session_id_for(uuid4(), "a")


def test_answer_deltas_are_copied_under_the_final_text_name_and_reasoning_as_thinking():
    delta = chunk_for({"event": "message.delta", "delta": "Hel"})
    assert delta is not None and delta.tool_name == FINAL_TEXT and json.loads(delta.content)["preview"] == "Hel"
    thinking = chunk_for({"event": "reasoning.available", "text": "hmm"})
    assert thinking is not None and (thinking.kind, thinking.content) == ("thinking", "hmm")
    assert chunk_for({"event": "run.completed", "output": "x"}) is None


async def test_a_disabled_gateway_keeps_its_configuration_and_probes_disabled_without_being_asked():
    (gateway,) = parse_hermes_gateways(gateways({"id": "uni", "base_url": "http://127.0.0.1:9", "enabled": False}))
    assert (gateway.enabled, gateway.base_url) == (False, "http://127.0.0.1:9")
    result = await probe(gateway)
    assert (result.status, result.detail) == ("disabled", "enabled: false in FLOWTRAIL_HERMES_GATEWAYS")


def test_a_node_on_a_disabled_gateway_is_refused_saying_so():
    (gateway,) = parse_hermes_gateways(gateways({"id": "uni", "base_url": "http://h:1", "enabled": False}))
    with pytest.raises(VisitFailure, match=r"hermes gateway 'uni' is disabled \(enabled: false in FLOWTRAIL_HERMES_GATEWAYS\)"):
        usable_gateway((gateway,), None)


@pytest.mark.parametrize("field", ["stop_confirm_seconds", "status_retry_seconds"])
def test_the_stop_and_status_bounds_must_be_positive(field):
    with pytest.raises(SystemExit, match=field):
        parse_hermes_gateways(gateways({"id": "uni", "base_url": "http://h:1", field: 0}))
