"""Capture the spans an agent ends on an OpenTelemetry tracer provider, and rebuild its runs from them."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

    from monitor.trajectory.model import Run
    from monitor.trajectory.spans import SpanRecord

__all__ = ["RunCapture", "describe_runs"]


class _Router(SpanProcessor):
    """Attached once to a provider: hands every ended span to the exporters of the open captures."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.exporters: list[InMemorySpanExporter] = []

    def on_end(self, span: ReadableSpan) -> None:
        with self.lock:
            targets = list(self.exporters)
        for exporter in targets:
            exporter.export((span,))

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


_ROUTER = _Router()
_ATTACHED: weakref.WeakSet[Any] = weakref.WeakSet()
_ATTACH_LOCK = threading.Lock()


def _attach(provider: Any) -> None:
    with _ATTACH_LOCK:
        if provider in _ATTACHED:
            return
        if not hasattr(provider, "add_span_processor"):
            raise TypeError(
                f"{type(provider).__name__} is not an OpenTelemetry SDK TracerProvider (no add_span_processor)"
            )
        provider.add_span_processor(_ROUTER)
        _ATTACHED.add(provider)


def _global_sdk_provider() -> Any:
    """The global tracer provider, after installing an SDK ``TracerProvider`` when none was set."""
    provider: Any = trace.get_tracer_provider()
    if not hasattr(provider, "add_span_processor"):
        trace.set_tracer_provider(TracerProvider())  # refused, with a warning, if someone set one meanwhile
        provider = trace.get_tracer_provider()
    return provider


def describe_runs(runs: Sequence[Run]) -> str:
    """One line per run (agent, trace and run ids, tool names): for assertion messages."""
    if not runs:
        return "  (no runs)"
    lines = []
    for run in runs:
        names = ", ".join(c.name for c in run.calls) or "no tool calls"
        nested = f", {len(run.children)} nested run(s)" if run.children else ""
        lines.append(f"  - agent {run.agent!r} trace {run.trace_id} run {run.run_id}: {names}{nested}")
    return "\n".join(lines)


class RunCapture:
    """The spans ended on a tracer provider while the capture is open, and the runs rebuilt from them.

    Contract:

    * Source of spans: the process's global tracer provider (an SDK ``TracerProvider`` is installed as the global
      one when none was set: set yours *before* the capture opens, or :meth:`attach` it), plus every provider
      passed to :meth:`attach`. Each provider gets one span processor for the life of the process (SDK providers
      cannot remove processors); while no capture is open it does nothing.
    * Only spans that *end* while the capture is open are kept (in an SDK ``InMemorySpanExporter``,
      :attr:`exporter`), in the order they ended; open captures each get every span. :meth:`clear` forgets them.
    * :meth:`records` are the spans as the daemon sees them: OTLP-encoded with the OTLP exporter's encoder and
      decoded by the daemon's decoder. :meth:`runs` are the top-level runs :func:`monitor.trajectory.build.build_runs`
      rebuilds from them (nested agent runs in ``Run.children``), by start time — the runs the daemon would score.
    * :meth:`run` is *the* run of the test: exactly one top-level run (agent-rooted runs preferred over bare
      model/tool subtrees; ``agent=`` narrows by agent name), else ``AssertionError`` listing what was captured.
    """

    def __init__(self, provider: Any | None = None) -> None:
        """``provider``: capture from this SDK provider instead of the global one."""
        self.exporter = InMemorySpanExporter()
        self._provider = provider
        self._open = False

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> RunCapture:
        if self._open:
            return self
        if self._provider is None:
            self._provider = _global_sdk_provider()
        _attach(self._provider)
        with _ROUTER.lock:
            _ROUTER.exporters.append(self.exporter)
        self._open = True
        return self

    def stop(self) -> None:
        if not self._open:
            return
        with _ROUTER.lock:
            _ROUTER.exporters.remove(self.exporter)
        self._open = False

    def __enter__(self) -> RunCapture:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def attach(self, provider: Any) -> RunCapture:
        """Also capture the spans ended on ``provider`` (an SDK ``TracerProvider`` your code uses directly)."""
        _attach(provider)
        return self

    @property
    def provider(self) -> Any:
        """The tracer provider this capture reads (the global SDK provider unless one was given)."""
        if self._provider is None:
            self._provider = _global_sdk_provider()
        return self._provider

    def tracer(self, name: str = "monitor.testing") -> Tracer:
        """A tracer of :attr:`provider`."""
        tracer: Tracer = self.provider.get_tracer(name)
        return tracer

    # ------------------------------------------------------------------ reading

    def spans(self) -> list[ReadableSpan]:
        """The finished spans captured so far, in the order they ended."""
        return list(self.exporter.get_finished_spans())

    def clear(self) -> None:
        """Forget the spans captured so far."""
        self.exporter.clear()

    def records(self) -> list[SpanRecord]:
        """The captured spans as the daemon decodes them from OTLP."""
        from monitor.evaluation.runner_common import spans_to_records

        return spans_to_records(self.spans())

    def runs(self) -> list[Run]:
        """The top-level runs rebuilt from the captured spans, by start time."""
        from monitor.trajectory.build import build_runs

        return build_runs(self.records())

    def run(self, agent: str | None = None) -> Run:
        """The one top-level run captured (of ``agent`` when given); ``AssertionError`` unless there is exactly one."""
        __tracebackhide__ = True
        from monitor.evaluation.runner_common import prefer_agent_runs
        from monitor.trajectory.build import build_runs

        records = self.records()
        runs = build_runs(records)
        candidates = [r for r in runs if agent is None or r.agent == agent]
        chosen = prefer_agent_runs(candidates, records)
        if len(chosen) == 1:
            return chosen[0]
        what = "no run" if not chosen else f"{len(chosen)} runs"
        of = f" of agent {agent!r}" if agent is not None else ""
        raise AssertionError(
            f"expected one agent run{of}, captured {what} from {len(records)} span(s):\n{describe_runs(runs)}"
        )
