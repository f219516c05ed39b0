"""The README's settings table is the one the settings model generates: every variable documented, no other."""

from __future__ import annotations

import re
from pathlib import Path

from scripts.config import every_variable, reference_table

ROOT = Path(__file__).resolve().parents[2]
START = "<!-- settings table:"
END = "<!-- end of settings table -->"


def readme_table() -> str:
    """The lines between the README's settings-table markers."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme[readme.index(START):readme.index(END)]
    return block.split("\n", 1)[1].strip()


def test_the_readme_documents_every_variable_the_settings_read_and_no_other():
    documented = re.findall(r"^\| `(FLOWTRAIL_[A-Z_]+)` \|", readme_table(), flags=re.MULTILINE)
    assert sorted(documented) == sorted(v.name for v in every_variable())


def test_the_readme_settings_table_is_the_one_flowtrail_config_reference_prints():
    assert readme_table() == reference_table()


def test_every_variable_has_a_one_line_description_and_a_distinct_name():
    found = every_variable()
    assert len({v.name for v in found}) == len(found)
    assert all(v.description and "\n" not in v.description for v in found)
