"""A server refuses to start on a JSON setting with an unknown field, in one line and without a traceback."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

BAD = [
    ("FLOWTRAIL_API_KEYS", '[{"key": "abc", "workflow_names": ["demo-report"]}]', "workflow_names"),
    ("FLOWTRAIL_MODELS", '[{"id": "m", "base_url": "http://127.0.0.1:1/v1", "model": "x", "apiKeyEnv": "K"}]', "apiKeyEnv"),
]


@pytest.mark.parametrize("variable,value,field", BAD)
def test_serve_exits_with_a_one_line_error_naming_the_unknown_field(tmp_path, variable, value, field):
    env = {**os.environ, "FLOWTRAIL_DATA_DIR": str(tmp_path / "data"), "FLOWTRAIL_PORT": "1", variable: value}
    done = subprocess.run([sys.executable, "-m", "scripts.cli", "serve"], env=env, capture_output=True, text=True,
                          timeout=30)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(variable) and f"`{field}`" in last and "accepted fields:" in last
    assert "Traceback" not in done.stderr
