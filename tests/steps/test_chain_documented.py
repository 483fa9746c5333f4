"""The README's "How it works" shows the chain as :func:`monitor.app.build_loop` builds it: same steps, same
order, and each step's module exists."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

from monitor import app

README = Path(__file__).resolve().parents[2] / "README.md"


def steps_built() -> list[str]:
    return re.findall(r"=\s*(\w+Step)\(", inspect.getsource(app.build_loop))


def test_the_readme_shows_the_chain_as_the_code_builds_it() -> None:
    text = README.read_text()
    section = text[text.index("## How it works") :]
    block = section[section.index("```python") : section.index("```", section.index("```python") + 3)]
    assert re.findall(r"=\s*(\w+Step)\(", block) == steps_built()
    assert len(steps_built()) == 11


def test_every_step_in_the_table_has_its_module() -> None:
    text = README.read_text()
    for name in re.findall(r"`steps/(\w+)\.py`", text):
        module = importlib.import_module(f"monitor.steps.{name}")
        assert any(cls.endswith("Step") for cls in vars(module)), name
