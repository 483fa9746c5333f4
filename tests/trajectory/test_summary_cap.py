"""The kept run's cap (``summary._cap``) copies on write: the same result as a plain recursive copy, on any JSON-like
value, without copying what needs no cut."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.trajectory.summary import _cap

LIMIT = 8


def _reference(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        return value if len(value) <= limit else f"{value[:limit]}[truncated {len(value) - limit} chars]"
    if isinstance(value, dict):
        return {k: _reference(v, limit) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_reference(v, limit) for v in value]
    return value


values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.tuples(inner, inner) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=30,
)


@given(values)
@settings(max_examples=400, deadline=None)
def test_the_cap_is_a_recursive_copy_that_cuts_long_strings(value: Any) -> None:
    assert _cap(value, LIMIT) == _reference(value, LIMIT)


def test_nothing_to_cut_allocates_nothing_and_a_cut_leaves_the_input_alone() -> None:
    doc = {"a": [1, "short", {"b": None}], "c": "tiny"}
    assert _cap(doc, LIMIT) is doc
    long = {"keep": {"x": 1}, "cut": ["a" * 20]}
    capped = _cap(long, LIMIT)
    assert capped == {"keep": {"x": 1}, "cut": ["aaaaaaaa[truncated 12 chars]"]}
    assert long["cut"] == ["a" * 20] and capped["keep"] is long["keep"]
