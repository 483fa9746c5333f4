"""The README's "Testing your agent with monitor" example is a real test file: it is extracted from README.md (the
fenced ``python`` block right after the ``<!-- example: testing-kit -->`` marker) and run by pytest in a fresh
process, with the plugin loaded from its entry point as in a user's project."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

README = Path(__file__).resolve().parents[1] / "README.md"
MARKER = "<!-- example: testing-kit -->"


def example_from_readme() -> str:
    text = README.read_text(encoding="utf-8")
    at = text.find(MARKER)
    if at < 0:
        pytest.fail(f"README.md has no {MARKER!r} marker (section 'Testing your agent with monitor')")
    found = re.match(r"\s*```python\n(.*?)\n```", text[at + len(MARKER) :], re.DOTALL)
    if found is None:
        pytest.fail(f"README.md: no ```python block right after {MARKER!r}")
    return found.group(1) + "\n"


def test_the_readme_testing_kit_example_passes(pytester: pytest.Pytester) -> None:
    code = example_from_readme()
    tests = re.findall(r"^def (test_\w+)\(", code, re.MULTILINE)
    assert tests, "the example is a test file"
    pytester.makepyfile(test_readme_example=code)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=len(tests))
