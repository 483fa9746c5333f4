"""The README's figures table is the rendering of the checked-in benchmark results (``make bench`` writes both)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.figures import BEGIN, END, Figure, load, main, publish, render, splice


def test_the_readme_table_matches_the_results() -> None:
    assert main(["--check"]) == 0, "run `python bench/figures.py` after `make bench`"


def test_every_results_file_has_figures_with_a_command() -> None:
    docs = load()
    assert docs, "bench/results/ holds no results"
    for doc in docs:
        assert doc["command"] and doc["figures"], doc["bench"]
        for raw in doc["figures"]:  # type: ignore[union-attr]
            Figure(**raw).met()  # a malformed goal raises


@pytest.mark.parametrize(
    ("value", "goal", "met"),
    [(4.9, "<= 5", True), (5.1, "<= 5", False), (0.5, ">= 0.5", True), (0.2, ">= 0.5", False), (1.0, "", None)],
)
def test_a_goal_is_a_comparison(value: float, goal: str, met: bool | None) -> None:
    assert Figure("k", "label", value, "×", goal=goal).met() is met


def test_a_malformed_goal_names_the_figure() -> None:
    with pytest.raises(ValueError, match="figure k"):
        Figure("k", "label", 1.0, "×", goal="about 5").met()


def test_publish_then_render_and_splice(tmp_path: Path) -> None:
    path = publish(
        "demo", "python bench/demo.py", [Figure("a", "A ratio", 0.25, "×", "raw", ">= 0.5", "1 vs 4")], results=tmp_path
    )
    doc = json.loads(path.read_text())
    assert doc["figures"][0]["value"] == 0.25
    table = render([doc])
    assert "| A ratio (1 vs 4) | 0.25× | raw | >= 0.5 | **no** | `python bench/demo.py` |" in table
    readme = f"intro\n{BEGIN}\nold\n{END}\nrest\n"
    assert splice(readme, table) == f"intro\n{BEGIN}\n{table}\n{END}\nrest\n"
    with pytest.raises(ValueError):
        splice("no markers", table)
