"""Context tokens: issued per visit, bound to run and visit, short-lived, capped, swept, never kept in clear."""

from __future__ import annotations

import asyncio
import re
from uuid import uuid4

import pytest

from engine.context.tokens import (
    ContextTokens,
    ExpiredToken,
    Grant,
    InvalidToken,
    RunMismatch,
    TooManyTokens,
)
from engine.settings import ContextSettings

RUN = uuid4()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def tokens(clock: Clock | None = None, **settings) -> ContextTokens:
    return ContextTokens(ContextSettings(**settings), clock=clock or Clock())


def test_a_token_is_48_lowercase_hex_characters_granting_its_run_and_visit():
    service = tokens()
    token = service.issue(RUN, "v1")
    assert re.fullmatch(r"[0-9a-f]{48}", token)
    assert service.authenticate(token) == Grant(RUN, "v1")
    assert service.check(token, RUN.hex) == Grant(RUN, "v1")
    assert service.check(token, str(RUN)) == Grant(RUN, "v1")


def test_every_token_is_different():
    service = tokens()
    assert len({service.issue(RUN, f"v{i}") for i in range(50)}) == 50


def test_no_token_is_issued_when_context_query_is_disabled():
    service = tokens(enabled=False)
    assert service.issue(RUN, "v1") is None
    assert len(service) == 0


@pytest.mark.parametrize("token", [None, "", "abc", "A" * 48, "g" * 48, "0" * 47, "0" * 49])
def test_a_missing_or_malformed_token_is_invalid(token):
    with pytest.raises(InvalidToken):
        tokens().authenticate(token)


def test_a_well_formed_token_that_was_never_issued_is_invalid():
    service = tokens()
    service.issue(RUN, "v1")
    with pytest.raises(InvalidToken):
        service.authenticate("0" * 48)


def test_a_token_for_another_run_is_a_run_mismatch_that_is_forbidden():
    service = tokens()
    token = service.issue(RUN, "v1")
    for other in (uuid4().hex, "not-a-run-id", None):
        with pytest.raises(RunMismatch) as refused:
            service.check(token, other)
        assert refused.value.code == "FORBIDDEN"


def test_a_token_expires_after_its_ttl_of_120_seconds_by_default():
    clock = Clock()
    service = tokens(clock)
    token = service.issue(RUN, "v1")
    clock.now += 119.9
    assert service.authenticate(token).visit_uuid == "v1"
    clock.now += 0.1
    with pytest.raises(ExpiredToken) as refused:
        service.authenticate(token)
    assert refused.value.code == "UNAUTHORIZED"
    with pytest.raises(InvalidToken):
        service.authenticate(token)


def test_invalidating_a_visit_ends_all_of_its_tokens_and_only_its_own():
    service = tokens()
    first, second = service.issue(RUN, "v1"), service.issue(RUN, "v1")
    other = service.issue(RUN, "v2")
    service.invalidate_visit(RUN, "v1")
    for token in (first, second):
        with pytest.raises(InvalidToken):
            service.authenticate(token)
    assert service.authenticate(other).visit_uuid == "v2"


def test_a_fifth_live_token_for_one_visit_is_refused():
    service = tokens()
    issued = [service.issue(RUN, "v1") for _ in range(4)]
    with pytest.raises(TooManyTokens, match="already holds 4 live context tokens"):
        service.issue(RUN, "v1")
    assert all(service.authenticate(token) for token in issued)
    assert service.issue(RUN, "v2") is not None


def test_expired_and_invalidated_tokens_do_not_count_against_the_limit():
    clock = Clock()
    service = tokens(clock, max_tokens_per_visit=2)
    service.issue(RUN, "v1")
    service.issue(RUN, "v1")
    clock.now += 121
    service.issue(RUN, "v1")
    service.invalidate_visit(RUN, "v1")
    service.issue(RUN, "v1")
    assert service.issue(RUN, "v1") is not None


def test_sweeping_drops_expired_tokens_only():
    clock = Clock()
    service = tokens(clock, token_ttl_seconds=10)
    service.issue(RUN, "v1")
    clock.now += 5
    fresh = service.issue(RUN, "v2")
    clock.now += 5
    assert service.sweep() == 1
    assert len(service) == 1 and service.authenticate(fresh).visit_uuid == "v2"


async def test_the_sweeper_runs_on_its_interval_until_closed():
    service = ContextTokens(ContextSettings(token_ttl_seconds=0.01, cleanup_interval_seconds=0.05))
    service.issue(RUN, "v1")
    service.start()
    await asyncio.sleep(0.2)
    assert len(service) == 0
    await service.close()


def test_the_service_keeps_no_token_in_clear_and_never_shows_one():
    service = tokens()
    token = service.issue(RUN, "v1")
    assert token not in repr(service)
    assert token not in repr(vars(service))
    assert token[:8] not in repr(vars(service))
