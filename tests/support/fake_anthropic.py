"""Re-export of the shipped fake: :mod:`monitor.testing.fake_anthropic` (``from monitor.testing import FakeAnthropic``).

Kept so that existing imports (``from tests.support.fake_anthropic import FakeAnthropic``) keep working, and so that
the framework generators (tests/fixtures/generators), which run in virtualenvs without this project installed and
import ``fake_anthropic`` from this directory, still can: when ``monitor`` cannot be imported, the module (standard
library only) is loaded from its file.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def _load() -> ModuleType:
    try:
        import monitor.testing.fake_anthropic as module
    except ImportError:
        name = "_monitor_testing_fake_anthropic"
        if name in sys.modules:
            return sys.modules[name]
        path = Path(__file__).resolve().parents[2] / "monitor" / "testing" / "fake_anthropic.py"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:  # pragma: no cover - the file ships with the repository
            raise
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses resolve their module while it executes
        spec.loader.exec_module(module)
    return module


_module = _load()
ERROR_TYPES = _module.ERROR_TYPES
Error = _module.Error
FakeAnthropic = _module.FakeAnthropic
RecordedRequest = _module.RecordedRequest
Turn = _module.Turn
tool_results = _module.tool_results
tool_uses = _module.tool_uses

__all__ = ["ERROR_TYPES", "Error", "FakeAnthropic", "RecordedRequest", "Turn", "tool_results", "tool_uses"]
