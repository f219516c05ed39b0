"""Settings from the environment: read once and strictly, so a typo can neither pass unnoticed nor widen access."""

from __future__ import annotations

import hashlib
import json

import pytest

from engine.access import DEMO_KEY, ApiKey, former_id, ids_naming_their_secret
from engine.config import SettingsError
from engine.settings import Settings


def keys_from(raw: str):
    return Settings.from_env({"FLOWTRAIL_API_KEYS": raw}).api_keys


def models_from(raw: str):
    return Settings.from_env({"FLOWTRAIL_MODELS": raw}).engine.models


def refusal(env: dict[str, str]) -> str:
    with pytest.raises(SettingsError) as refused:
        Settings.from_env(env)
    message = str(refused.value)
    assert "\n" not in message and refused.value.code == message
    return message


def test_with_nothing_set_the_settings_are_the_model_defaults_with_the_generated_demo_key():
    settings = Settings.from_env({})
    assert settings == Settings() and settings.demo_key_in_use and settings.api_keys == (DEMO_KEY,)


def test_the_generated_demo_key_sees_all_runs():
    (key,) = Settings.from_env({}).api_keys
    assert (key.key, key.id, key.sees_all_runs) == ("demo-key", "demo", True)


def test_values_are_converted_from_text_to_their_fields_types(tmp_path):
    settings = Settings.from_env({
        "FLOWTRAIL_PORT": "8080", "FLOWTRAIL_LOAD_DEMOS": "false", "FLOWTRAIL_CONTEXT_QUERY_ENABLED": "0",
        "FLOWTRAIL_COALESCE_MS": "12.5", "FLOWTRAIL_WORKFLOWS_DIR": str(tmp_path), "FLOWTRAIL_DATA_DIR": "/var/ft",
    })
    assert (settings.port, settings.load_demos, settings.context.enabled, settings.stream.coalesce_ms) == (
        8080, False, False, 12.5)
    assert settings.workflows_dir == tmp_path and settings.store.database_url == "sqlite:////var/ft/flowtrail.db"


def test_an_empty_variable_counts_as_unset():
    assert Settings.from_env({"FLOWTRAIL_PORT": "", "FLOWTRAIL_WORKFLOWS_DIR": ""}) == Settings()


def test_a_configured_key_sees_only_its_own_runs_unless_it_says_so():
    keys = keys_from('[{"key": "a", "id": "a"}, {"key": "b", "id": "b", "seesAllRuns": true}]')
    assert [k.sees_all_runs for k in keys] == [False, True]
    assert not Settings.from_env({"FLOWTRAIL_API_KEYS": '[{"key": "a", "id": "a"}]'}).demo_key_in_use


def test_a_key_without_an_id_is_refused_with_the_way_to_keep_the_runs_it_created_before():
    message = refusal({"FLOWTRAIL_API_KEYS": '[{"key": "k1", "id": "ops"}, {"key": "s3cret-value"}]'})
    assert message.startswith("FLOWTRAIL_API_KEYS: key 2 of 2 has no `id`")
    assert 'printf %s "$KEY" | sha256sum | cut -c1-12' in message and "s3cret" not in message
    assert former_id("s3cret-value") not in message


def test_the_former_id_is_the_prefix_of_the_secrets_sha256_that_runs_were_recorded_under():
    assert former_id("s3cret-value") == "key-" + hashlib.sha256(b"s3cret-value").hexdigest()[:12]


def test_an_id_kept_from_before_is_told_apart_from_a_chosen_one():
    keys = keys_from(json.dumps([{"key": "old-secret", "id": former_id("old-secret")}, {"key": "k", "id": "ops"},
                                 {"key": "rotated", "id": former_id("old-secret")[:-1] + "0"}]))
    assert ids_naming_their_secret(keys) == [former_id("old-secret")]


def test_keys_come_from_the_key_file_when_one_is_named(tmp_path):
    path = tmp_path / "keys.json"
    path.write_text('[{"key": "k-s3cret", "id": "ops", "seesAllRuns": true}]')
    settings = Settings.from_env({"FLOWTRAIL_API_KEYS_FILE": str(path), "FLOWTRAIL_HOST": "0.0.0.0"})
    assert settings.api_keys == (ApiKey(key="k-s3cret", id="ops", sees_all_runs=True),)
    assert settings.api_keys_file == path and not settings.demo_key_in_use


@pytest.mark.parametrize("content,problem", [
    (None, "FLOWTRAIL_API_KEYS_FILE: cannot read"),
    ('[{"key": "s3cret"}]', "FLOWTRAIL_API_KEYS_FILE: key 1 of 1 has no `id`"),
    ('[{"key": "s3cret", "id": "a"', "FLOWTRAIL_API_KEYS_FILE: not a valid JSON list"),
    ("[]", "FLOWTRAIL_API_KEYS_FILE: the list is empty"),
])
def test_a_key_file_without_a_usable_key_list_is_refused_at_start_up_naming_the_variable(tmp_path, content, problem):
    path = tmp_path / "keys.json"
    if content is not None:
        path.write_text(content)
    message = refusal({"FLOWTRAIL_API_KEYS_FILE": str(path)})
    assert message.startswith(problem) and "s3cret" not in message


def test_keys_in_both_the_variable_and_a_key_file_are_refused(tmp_path):
    path = tmp_path / "keys.json"
    path.write_text('[{"key": "a", "id": "a"}]')
    message = refusal({"FLOWTRAIL_API_KEYS_FILE": str(path), "FLOWTRAIL_API_KEYS": '[{"key": "b", "id": "b"}]'})
    assert message.startswith("FLOWTRAIL_API_KEYS_FILE: FLOWTRAIL_API_KEYS is set too")


@pytest.mark.parametrize("variable,value,problem,accepted", [
    ("FLOWTRAIL_LOAD_DEMOS", "ture", "got 'ture'", "true or false"),
    ("FLOWTRAIL_CONTEXT_QUERY_ENABLED", "yes please", "got 'yes please'", "true or false"),
    ("FLOWTRAIL_PORT", "80a", "got '80a'", "a whole number >= 0 and <= 65535"),
    ("FLOWTRAIL_PORT", "70000", "got '70000'", "a whole number >= 0 and <= 65535"),
    ("FLOWTRAIL_WRITE_THREADS", "2.5", "got '2.5'", "a whole number >= 1"),
    ("FLOWTRAIL_KEEPALIVE_SECONDS", "soon", "got 'soon'", "a number > 0"),
    ("FLOWTRAIL_HOT_BUFFER_MESSAGES", "100", "got '100'", "a whole number >= 5000"),
    ("FLOWTRAIL_API_KEYS", "[]", "the list is empty", "a non-empty JSON list of keys"),
    ("FLOWTRAIL_API_KEYS", '[{"key": "s3cret"', "not a valid JSON list", "accepted fields: key, workflowNames"),
    ("FLOWTRAIL_API_KEYS", '[{"key": ""}]', "a key has an empty `key`", "a non-empty JSON list of keys"),
    ("FLOWTRAIL_API_KEYS", '[{"key": "a", "id": "ops"}, {"key": "b", "id": "ops"}]',
     "two keys share the id 'ops'", "distinct ids"),
    ("FLOWTRAIL_DATABASE_URL", "mysql://root:pw@db/flowtrail", "the scheme 'mysql' is neither sqlite nor postgresql",
     "postgresql://user[:password]@host[:port]/db"),
    ("FLOWTRAIL_DATABASE_URL", "postgresql://u:pw@db:5o32/flowtrail", "Port could not be cast", "postgresql://"),
    ("FLOWTRAIL_DATABASE_URL", "sqlite:///", "it names no SQLite file", "sqlite:///path.db"),
    ("FLOWTRAIL_MODELS", "[{", "not a valid JSON list", "accepted fields: id, base_url, model, api_key_env"),
    ("FLOWTRAIL_MODELS", json.dumps([{"id": "m", "base_url": "http://x/v1", "model": "x"}] * 2),
     "the model id 'm' is reserved or configured twice", "distinct ids other than `scripted`"),
    ("FLOWTRAIL_MODELS", json.dumps([{"id": "scripted", "base_url": "http://x/v1", "model": "x"}]),
     "the model id 'scripted' is reserved", "distinct ids"),
    ("FLOWTRAIL_DEFAULT_MODEL", "gpt-9", "'gpt-9' is not a configured model", "one of 'scripted'"),
    ("FLOWTRAIL_WORKFLOWS_DIR", "/no/such/flows", "'/no/such/flows' is not a directory", "an existing directory"),
    ("FLOWTRAIL_LOAD_DEMO", "true", "no such setting (did you mean FLOWTRAIL_LOAD_DEMOS?)", "`flowtrail config`"),
    ("FLOWTRAIL_HOST", "0.0.0.0", "'0.0.0.0' is not a loopback address and FLOWTRAIL_API_KEYS is unset",
     "FLOWTRAIL_ALLOW_DEMO_KEY_ON_NETWORK=true"),
])
def test_a_bad_setting_is_refused_in_one_line_naming_the_variable_the_problem_and_what_is_accepted(
    variable, value, problem, accepted,
):
    message = refusal({variable: value})
    assert message.startswith(f"{variable}: {problem}") and accepted in message.split("; accepted: ", 1)[1]
    assert "s3cret" not in message and "pw" not in message


def test_every_unknown_variable_is_named_in_the_one_line():
    assert refusal({"FLOWTRAIL_PROT": "1", "FLOWTRAIL_ZZZ": "2"}).startswith(
        "FLOWTRAIL_PROT, FLOWTRAIL_ZZZ: no such settings (did you mean FLOWTRAIL_PORT?)")


def test_the_test_suites_and_the_benches_own_variables_and_a_models_key_variable_are_not_settings_typos():
    models = json.dumps([{"id": "m", "base_url": "http://x/v1", "model": "x", "api_key_env": "FLOWTRAIL_OPENAI_KEY"}])
    settings = Settings.from_env({"FLOWTRAIL_TEST_PG": "postgresql://x", "FLOWTRAIL_BENCH_PG": "postgresql://y",
                                  "FLOWTRAIL_MODELS": models, "FLOWTRAIL_OPENAI_KEY": "sk-1",
                                  "FLOWTRAIL_DEFAULT_MODEL": "m"})
    assert settings.engine.default_model_id == "m"


@pytest.mark.parametrize("env", [
    {"FLOWTRAIL_HOST": "0.0.0.0", "FLOWTRAIL_ALLOW_DEMO_KEY_ON_NETWORK": "true"},
    {"FLOWTRAIL_HOST": "0.0.0.0", "FLOWTRAIL_API_KEYS": '[{"key": "long-random-secret", "id": "ops"}]'},
    {"FLOWTRAIL_HOST": "::1"},
    {"FLOWTRAIL_HOST": "localhost"},
    {"FLOWTRAIL_HOST": "127.0.0.2"},
])
def test_the_demo_key_is_served_beyond_loopback_only_when_a_variable_says_so(env):
    assert Settings.from_env(env).host == env["FLOWTRAIL_HOST"]


def test_a_refused_setting_ends_a_caller_that_does_not_catch_it_with_its_message():
    with pytest.raises(SystemExit, match="FLOWTRAIL_PORT: got 'x'"):
        Settings.from_env({"FLOWTRAIL_PORT": "x"})


KEYS_ACCEPT = "accepted fields: key, workflowNames, workflowIds, id, seesAllRuns"
MODELS_ACCEPT = "accepted fields: id, base_url, model, api_key_env"


@pytest.mark.parametrize("parse,variable,raw,field,accepted", [
    (keys_from, "FLOWTRAIL_API_KEYS", '[{"key": "abc", "workflow_names": ["demo-report"]}]', "workflow_names",
     KEYS_ACCEPT),
    (keys_from, "FLOWTRAIL_API_KEYS", '[{"key": "abc", "workflowName": ["demo-report"]}]', "workflowName",
     KEYS_ACCEPT),
    (keys_from, "FLOWTRAIL_API_KEYS", '[{"key": "abc", "sees_all_runs": true}]', "sees_all_runs", KEYS_ACCEPT),
    (models_from, "FLOWTRAIL_MODELS",
     '[{"id": "m", "baseUrl": "http://127.0.0.1:1/v1", "base_url": "http://127.0.0.1:1/v1", "model": "x"}]', "baseUrl",
     MODELS_ACCEPT),
    (models_from, "FLOWTRAIL_MODELS", '[{"id": "m", "base_url": "http://127.0.0.1:1/v1", "model": "x", "api_key": "sk-1"}]',
     "api_key", MODELS_ACCEPT),
])
def test_an_unknown_field_of_a_json_setting_is_refused_in_one_line_naming_it_and_the_accepted_ones(
    parse, variable, raw, field, accepted,
):
    with pytest.raises(SettingsError) as refused:
        parse(raw)
    message = str(refused.value)
    assert "\n" not in message and message.startswith(variable)
    assert f"`{field}`" in message and accepted in message and "sk-1" not in message
