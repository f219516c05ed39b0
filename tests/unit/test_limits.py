"""Per-key limits: the token bucket, stream slots, and tables only as large as the keys that made requests."""

from __future__ import annotations

import pytest

from api.limits import KeyLimits, RateLimited, TokenBucket, TooManyStreams
from engine.access import ApiKey
from engine.limits import LimitSettings

A = ApiKey(key="a-secret", id="a")
B = ApiKey(key="b-secret", id="b")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_bucket_gives_its_burst_at_once_then_its_rate_and_says_how_long_to_wait():
    bucket = TokenBucket(rate=2, burst=3, now=0)
    assert [bucket.take(0) for _ in range(3)] == [0, 0, 0]
    assert bucket.take(0) == pytest.approx(0.5)
    assert bucket.take(0.5) == 0
    assert bucket.take(10) == 0 and bucket.tokens == pytest.approx(2)


def test_a_key_over_its_rate_is_refused_with_retry_after_and_another_key_is_not():
    clock = Clock()
    limits = KeyLimits(LimitSettings(rate_limit_per_key=1, rate_limit_burst=2), clock=clock)
    limits.admit(A)
    limits.admit(A)
    with pytest.raises(RateLimited) as refused:
        limits.admit(A)
    assert refused.value.code == "RATE_LIMITED" and refused.value.details["retry_after"] == 1
    limits.admit(B)
    clock.now += 1
    limits.admit(A)


def test_no_rate_means_no_bucket_at_all():
    limits = KeyLimits(LimitSettings(rate_limit_per_key=0))
    assert limits.buckets == {}
    for _ in range(1000):
        limits.admit(A)


def test_stream_slots_are_counted_per_key_and_given_back_once():
    limits = KeyLimits(LimitSettings(max_streams_per_key=2))
    first, second = limits.open_stream(A), limits.open_stream(A)
    with pytest.raises(TooManyStreams) as refused:
        limits.open_stream(A)
    assert refused.value.code == "TOO_MANY_STREAMS" and refused.value.details["retry_after"] >= 1
    limits.open_stream(B).release()
    first.release()
    first.release()
    assert limits.streams == {"a": 1, "b": 0}
    del second
    assert limits.streams == {"a": 0, "b": 0}


def test_the_tables_hold_only_keys_that_made_requests_so_a_key_added_by_a_reload_is_limited_too():
    limits = KeyLimits(LimitSettings(rate_limit_per_key=5, rate_limit_burst=1))
    assert limits.streams == limits.buckets == {}
    limits.admit(A)
    limits.open_stream(B).release()
    assert set(limits.buckets) == {"a"} and set(limits.streams) == {"b"}
    added = ApiKey(key="c-secret", id="c")
    limits.admit(added)
    with pytest.raises(RateLimited):
        limits.admit(added)
