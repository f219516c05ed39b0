"""The timeline's costs: priced only when every model that used tokens has a price, in one currency."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from api.timeline import millis, priced
from engine.llm.config import ModelPrice

GPT = ModelPrice(model="gpt", input_per_1k=1.0, output_per_1k=4.0, currency="USD")
CLAUDE = ModelPrice(model="claude", input_per_1k=3.0, output_per_1k=15.0, currency="USD")
LOCAL = ModelPrice(model="local", input_per_1k=0.5, output_per_1k=0.5, currency="EUR")


def test_tokens_of_priced_models_cost_their_price_per_thousand():
    usage = priced({"gpt": [2000, 500], "claude": [1000, 100]}, {"gpt": GPT, "claude": CLAUDE})
    assert (usage.prompt_tokens, usage.completion_tokens) == (3000, 600)
    assert (usage.cost, usage.currency) == (2.0 + 2.0 + 3.0 + 1.5, "USD")


def test_a_model_without_a_price_leaves_the_cost_unknown_not_partial():
    usage = priced({"gpt": [1000, 0], "scripted": [10, 10]}, {"gpt": GPT})
    assert (usage.prompt_tokens, usage.cost, usage.currency) == (1010, None, None)


def test_models_priced_in_two_currencies_have_no_one_cost():
    assert priced({"gpt": [1000, 0], "local": [1000, 0]}, {"gpt": GPT, "local": LOCAL}).cost is None


def test_without_any_price_there_is_no_cost_and_without_tokens_a_priced_run_costs_nothing():
    assert priced({"gpt": [5, 5]}, {}).cost is None
    assert (priced({}, {"gpt": GPT}).cost, priced({"gpt": [0, 0]}, {"gpt": GPT}).currency) == (0, "USD")


def test_a_span_is_whole_milliseconds_and_unknown_when_an_end_is_missing():
    start = datetime(2026, 1, 1, tzinfo=UTC)
    assert millis(start, start + timedelta(seconds=1.2344)) == 1234
    assert millis(start.replace(tzinfo=None), start + timedelta(milliseconds=7)) == 7
    assert millis(start, None) is None and millis(None, start) is None
