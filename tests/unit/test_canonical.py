"""Canonical JSON: one text, and one digest, for values that differ only in key order."""

from __future__ import annotations

from domain.canonical import canonical_digest, canonical_json
from domain.catalogue import definition_digest
from domain.idempotency import request_digest

REQUEST = {"variables": {"topic": "潮汐", "n": 1.5}, "async": True, "ttlHours": 720, "files": []}


def test_canonical_json_sorts_keys_at_every_depth_has_no_spaces_and_keeps_non_ascii_text():
    assert canonical_json(REQUEST) == '{"async":true,"files":[],"ttlHours":720,"variables":{"n":1.5,"topic":"潮汐"}}'


def test_the_digest_is_the_same_for_any_key_order_and_never_changes():
    reordered = {"files": [], "ttlHours": 720, "async": True, "variables": {"n": 1.5, "topic": "潮汐"}}
    assert canonical_digest(reordered) == canonical_digest(REQUEST)
    assert canonical_digest(REQUEST) == "8f5b02d393ccaa28b3bc8dffd1aa3160b4f127a4f5eb1f1df1a0255e3e75b742"


def test_request_and_definition_digests_are_the_canonical_digest():
    assert request_digest(REQUEST) == definition_digest(REQUEST) == canonical_digest(REQUEST)
