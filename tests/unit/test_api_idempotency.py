"""Idempotency claims: a key is bound to caller, normalised request and workflow version."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID, uuid4, uuid5

import msgspec
import pytest

from domain.idempotency import (
    IDEMPOTENCY_NAMESPACE,
    IdempotencyKeyClaimed,
    IdempotencyKeyInvalid,
    IdempotencyKeyReused,
    check_key,
    claim_key,
    claim_stream_id,
    replay_of,
    request_digest,
)
from engine.store.event_store import FlowtrailApplication

T0 = datetime(2026, 7, 1, tzinfo=UTC)
RUN = UUID("a3f9b2c1a3f9b2c1a3f9b2c1a3f9b2c1")


def claim(digest="d1", name="report-pipeline", version=1) -> IdempotencyKeyClaimed:
    return claim_key(caller_key_id="demo", key="k-1", run_id=RUN, digest=digest, workflow_name=name,
                     workflow_version=version, at=T0)


def test_the_claim_stream_is_a_uuid5_of_caller_and_key_in_a_fixed_namespace():
    assert IDEMPOTENCY_NAMESPACE == UUID("0b7e3c52-9d1a-5f64-8e2b-4c6a1d9f3e70")
    assert claim_stream_id("demo", "k-1") == uuid5(IDEMPOTENCY_NAMESPACE, "demo:k-1")
    assert claim_stream_id("demo", "k-1") != claim_stream_id("other", "k-1")


def test_a_claim_is_version_1_of_its_stream_and_names_the_run():
    event = claim()
    assert (event.originator_id, event.originator_version, event.run_id) == (claim_stream_id("demo", "k-1"), 1, RUN)


def test_the_digest_ignores_key_order_but_not_values():
    a = {"variables": {"x": 1, "y": [1, 2]}, "async": True}
    b = {"async": True, "variables": {"y": [1, 2], "x": 1}}
    assert request_digest(a) == request_digest(b)
    assert request_digest(a) != request_digest({**a, "async": False})
    assert len(request_digest(a)) == 64


def test_the_same_request_replays_the_claimed_run():
    assert replay_of(claim(), digest="d1", workflow_name="report-pipeline", workflow_version=1) == RUN


@pytest.mark.parametrize("digest,name,version,fragment", [
    ("d2", "report-pipeline", 1, "different request"),
    ("d1", "other-flow", 1, "different request"),
    ("d1", "report-pipeline", 2, "version 1"),
])
def test_anything_else_is_refused_as_a_reused_key(digest, name, version, fragment):
    with pytest.raises(IdempotencyKeyReused) as refused:
        replay_of(claim(), digest=digest, workflow_name=name, workflow_version=version)
    assert fragment in refused.value.message and refused.value.code == "IDEMPOTENCY_KEY_REUSED"


@pytest.mark.parametrize("key", ["a", "x" * 255, "order-2026-07-01:0001", "550e8400-e29b-41d4-a716-446655440000"])
def test_visible_ascii_keys_up_to_255_characters_are_accepted(key):
    assert check_key(key) == key


@pytest.mark.parametrize("key", ["", "x" * 256, "with space", "tab\t", "é", "line\n"])
def test_other_keys_are_invalid(key):
    with pytest.raises(IdempotencyKeyInvalid):
        check_key(key)


def test_the_claim_round_trips_through_the_stores_mapper_under_its_stable_tag():
    mapper = FlowtrailApplication.construct_mapper(None)
    stored = mapper.to_stored_event(claim())
    assert stored.topic == "IdempotencyKeyClaimed"
    assert mapper.to_domain_event(stored) == claim()
    assert msgspec.json.decode(stored.state)["type"] == "IdempotencyKeyClaimed"
    assert uuid4() != RUN
