"""The test kit: fakes and helpers for testing an agent, a judge or the pipeline with monitor.

Shipped with the package (as opentelemetry-sdk ships ``InMemorySpanExporter``), one import path::

    from monitor.testing import (
        MemoryBroker, ManualClock, RecordingMetrics,        # drive the run loop without Kafka or real time
        FakeAnthropic, Turn, AnthropicError,                # Anthropic's Messages / Batches API, scripted
        RunCapture, assert_tools,                           # capture an agent's spans, assert on its tool calls
    )

Each piece documents its contract in its docstring:

* :class:`~monitor.ingest.memory.MemoryBroker` / :class:`~monitor.ingest.memory.MemorySource`: topics, partitions
  and consumer groups in memory; a source satisfies :class:`monitor.ingest.consumer.Source` and passes the same
  contract suite as :class:`~monitor.ingest.consumer.KafkaSource` on a real broker (tests/contract).
  ``RunLoop(settings, broker.source_factory([topic]), …)``.
* :class:`ManualClock`: seconds that move only on ``advance()``; valid as the loop's monotonic ``clock`` and its
  ``wall`` clock at once.
* :class:`RecordingMetrics`: a :class:`monitor.ingest.loop.PipelineMetrics` that records every call, with
  counter / gauge queries (``total("store_write", "new")``, ``value("set_lag", topic, 0)``) and
  ``observed`` (the ``observe_results`` calls).
* :class:`FakeAnthropic`: a local HTTP server speaking the Messages and Message Batches APIs to the real
  ``anthropic`` SDK: scripted turns, judge verdicts as forced ``tool_use`` blocks (``script_verdict``), 429 with
  ``retry-after``, 529, 5xx, slow answers; every request recorded. Standard library only.
* :class:`RunCapture` and :func:`assert_tools`: the spans an agent ends on the OpenTelemetry tracer provider,
  rebuilt into runs as the daemon does; an assertion on the tool calls built on the ``trajectory_match`` scorer,
  with a failure message naming the call that differed and how. The pytest plugin
  (:mod:`monitor.pytest_plugin`, loaded automatically) wraps the capture in the ``monitor_runs`` fixture.

Importing this package is cheap: each piece is imported when first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from monitor import _lazy

if TYPE_CHECKING:
    from monitor.ingest.memory import MemoryBroker, MemoryRecord, MemorySource
    from monitor.testing.assertions import ArgsMode, ExpectedTool, Order, assert_tools
    from monitor.testing.capture import RunCapture, describe_runs
    from monitor.testing.clock import ManualClock
    from monitor.testing.fake_anthropic import Error as AnthropicError
    from monitor.testing.fake_anthropic import FakeAnthropic, RecordedRequest, Turn, tool_results, tool_uses
    from monitor.testing.metrics import MetricCall, RecordingMetrics

__all__ = [
    "AnthropicError",
    "ArgsMode",
    "ExpectedTool",
    "FakeAnthropic",
    "ManualClock",
    "MemoryBroker",
    "MemoryRecord",
    "MemorySource",
    "MetricCall",
    "Order",
    "RecordedRequest",
    "RecordingMetrics",
    "RunCapture",
    "Turn",
    "assert_tools",
    "describe_runs",
    "tool_results",
    "tool_uses",
]

_WHERE: dict[str, tuple[str, str]] = {
    "MemoryBroker": ("monitor.ingest.memory", "MemoryBroker"),
    "MemoryRecord": ("monitor.ingest.memory", "MemoryRecord"),
    "MemorySource": ("monitor.ingest.memory", "MemorySource"),
    "ManualClock": ("monitor.testing.clock", "ManualClock"),
    "MetricCall": ("monitor.testing.metrics", "MetricCall"),
    "RecordingMetrics": ("monitor.testing.metrics", "RecordingMetrics"),
    "FakeAnthropic": ("monitor.testing.fake_anthropic", "FakeAnthropic"),
    "Turn": ("monitor.testing.fake_anthropic", "Turn"),
    "AnthropicError": ("monitor.testing.fake_anthropic", "Error"),
    "RecordedRequest": ("monitor.testing.fake_anthropic", "RecordedRequest"),
    "tool_results": ("monitor.testing.fake_anthropic", "tool_results"),
    "tool_uses": ("monitor.testing.fake_anthropic", "tool_uses"),
    "RunCapture": ("monitor.testing.capture", "RunCapture"),
    "describe_runs": ("monitor.testing.capture", "describe_runs"),
    "assert_tools": ("monitor.testing.assertions", "assert_tools"),
    "ArgsMode": ("monitor.testing.assertions", "ArgsMode"),
    "ExpectedTool": ("monitor.testing.assertions", "ExpectedTool"),
    "Order": ("monitor.testing.assertions", "Order"),
}


def __getattr__(name: str) -> Any:
    return _lazy.load(__name__, globals(), _WHERE, name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
