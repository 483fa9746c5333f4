"""The pytest plugin of agent-tool-monitor: test which tools your agent calls, from its OpenTelemetry spans.

Registered through the ``pytest11`` entry point (name ``monitor``), so it is active wherever the package is
installed (``-p no:monitor`` turns it off). It adds:

* the ``monitor_runs`` fixture: a :class:`monitor.testing.RunCapture` open for the test. It collects the spans
  ended on the global OpenTelemetry tracer provider during the test (an SDK ``TracerProvider`` is installed as the
  global provider when none is set; ``monitor_runs.attach(provider)`` adds a provider your code uses directly)
  in an SDK ``InMemorySpanExporter``, and rebuilds them into runs as the daemon does: ``monitor_runs.run()`` is
  the test's one agent run, ``monitor_runs.runs()`` all top-level runs, ``monitor_runs.spans()`` the raw spans.
* :func:`assert_tools` (also ``from monitor.testing import assert_tools``): asserts the run's tool calls with
  ``order="exact" | "in_order" | "any_order"`` and ``args="exact" | "subset" | "ignore"``, on the project's
  ``trajectory_match`` scorer; the failure message lists the expected and actual calls and, per difference, which
  call differed and how (wrong tool, missing call, unexpected call, argument value, out of order).

Example::

    def test_weather_agent(monitor_runs):
        my_agent("What's the weather in Paris?")
        assert_tools(monitor_runs.run(), [("get_weather", {"city": "Paris"})])

Loading the plugin imports nothing heavy: the capture and the scorers are imported when a test uses them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from monitor.testing.assertions import assert_tools
    from monitor.testing.capture import RunCapture

__all__ = ["assert_tools", "monitor_runs"]


@pytest.fixture
def monitor_runs() -> Iterator[RunCapture]:
    """The spans ended on the OpenTelemetry tracer provider during this test, and the runs they rebuild to."""
    from monitor.testing.capture import RunCapture

    with RunCapture() as capture:
        yield capture


def __getattr__(name: str) -> Any:
    if name == "assert_tools":
        from monitor.testing.assertions import assert_tools

        return assert_tools
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
