"""Settings from the environment: API keys are read strictly, so a typo cannot widen or share a key's access."""

from __future__ import annotations

import pytest

from engine.execution.models import parse_models
from engine.settings import parse_api_keys


def test_the_generated_demo_key_sees_all_runs():
    keys, generated = parse_api_keys(None)
    assert generated and [(k.key, k.key_id(), k.sees_all_runs) for k in keys] == [("demo-key", "demo", True)]


def test_a_configured_key_sees_only_its_own_runs_unless_it_says_so():
    keys, generated = parse_api_keys('[{"key": "a"}, {"key": "b", "seesAllRuns": true}]')
    assert not generated and [k.sees_all_runs for k in keys] == [False, True]


def test_a_key_without_an_id_is_named_by_a_hash_never_by_the_key_itself():
    (key,), _ = parse_api_keys('[{"key": "s3cret-value"}]')
    assert key.key_id().startswith("key-") and "s3cret" not in key.key_id()


def test_two_keys_with_one_id_are_refused_at_start_up():
    with pytest.raises(SystemExit, match="two keys share the id 'ops'"):
        parse_api_keys('[{"key": "a", "id": "ops"}, {"key": "b", "id": "ops"}]')


KEYS_ACCEPT = "accepted fields: key, workflowNames, workflowIds, id, seesAllRuns"
MODELS_ACCEPT = "accepted fields: id, base_url, model, api_key_env"


@pytest.mark.parametrize("parse,variable,raw,field,accepted", [
    (parse_api_keys, "FLOWTRAIL_API_KEYS", '[{"key": "abc", "workflow_names": ["demo-report"]}]', "workflow_names",
     KEYS_ACCEPT),
    (parse_api_keys, "FLOWTRAIL_API_KEYS", '[{"key": "abc", "workflowName": ["demo-report"]}]', "workflowName",
     KEYS_ACCEPT),
    (parse_api_keys, "FLOWTRAIL_API_KEYS", '[{"key": "abc", "sees_all_runs": true}]', "sees_all_runs", KEYS_ACCEPT),
    (parse_models, "FLOWTRAIL_MODELS",
     '[{"id": "m", "baseUrl": "http://127.0.0.1:1/v1", "base_url": "http://127.0.0.1:1/v1", "model": "x"}]', "baseUrl",
     MODELS_ACCEPT),
    (parse_models, "FLOWTRAIL_MODELS", '[{"id": "m", "base_url": "http://127.0.0.1:1/v1", "model": "x", "api_key": "sk-1"}]',
     "api_key", MODELS_ACCEPT),
])
def test_an_unknown_field_of_a_json_setting_is_refused_in_one_line_naming_it_and_the_accepted_ones(
    parse, variable, raw, field, accepted,
):
    with pytest.raises(SystemExit) as refused:
        parse(raw)
    message = str(refused.value)
    assert "\n" not in message and message.startswith(variable)
    assert f"`{field}`" in message and accepted in message and "sk-1" not in message
