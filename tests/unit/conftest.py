"""The unit area: pure tests of the domain, the projections and small pieces of the engine and the api.

A unit test uses no store and no server; one that asks for them belongs in tests/integration/.
"""

from __future__ import annotations

import pytest

NOT_FOR_UNIT_TESTS = frozenset({"store", "fake_openai"})


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Refuse a unit test that asks for a store or a server."""
    asked = sorted(NOT_FOR_UNIT_TESTS & set(getattr(item, "fixturenames", ())))
    if asked:
        pytest.fail(f"{item.nodeid} is a unit test but uses {', '.join(asked)}: move it to tests/integration/",
                    pytrace=False)
