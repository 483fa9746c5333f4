"""A metrics sink for the run loop that records every call instead of exporting it."""

from __future__ import annotations

import importlib
import inspect
import threading
import typing
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from monitor.scoring.result import ScoreResult
    from monitor.trajectory.model import Run

__all__ = ["MetricCall", "RecordingMetrics", "pipeline_metrics_protocol"]


@cache
def pipeline_metrics_protocol() -> type | None:
    """The metrics protocol the run loop takes (the annotation of its ``metrics`` parameter), wherever it is defined."""
    for module, attr in (("monitor.ingest.loop", "RunLoop.__init__"), ("monitor.app", "build_loop")):
        try:
            target: Any = importlib.import_module(module)
            for part in attr.split("."):
                target = getattr(target, part)
            hint = typing.get_type_hints(target).get("metrics")
        except Exception:  # moved, or an annotation that cannot be resolved at run time
            continue
        if isinstance(hint, type):
            return hint
    found = getattr(importlib.import_module("monitor.ingest.loop"), "PipelineMetrics", None)
    return found if isinstance(found, type) else None


@cache
def _protocol_methods() -> frozenset[str]:
    protocol = pipeline_metrics_protocol()
    if protocol is None:
        return frozenset()
    return frozenset(n for n, v in vars(protocol).items() if callable(v) and not n.startswith("_"))


@cache
def _signature(name: str) -> inspect.Signature | None:
    """The signature of the protocol's method ``name`` without ``self`` (None when it has no such method)."""
    protocol = pipeline_metrics_protocol()
    method = vars(protocol).get(name) if protocol is not None else None
    if method is None or not callable(method):
        return None
    sig = inspect.signature(method)
    return sig.replace(parameters=list(sig.parameters.values())[1:])


@dataclass(frozen=True, slots=True)
class MetricCall:
    """One call on the sink: its method ``name``, the arguments as passed, and ``arguments``: every parameter of
    the protocol's method by name, defaults applied (``{"arg0": …}`` by position
    when the call does not fit the protocol's signature)."""

    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    arguments: dict[str, Any] = field(default_factory=dict)

    @property
    def values(self) -> tuple[Any, ...]:
        """The argument values in parameter order."""
        return tuple(self.arguments.values())

    @property
    def n(self) -> Any:
        """The increment of a counter call: its ``n`` argument, else 1."""
        return self.arguments.get("n", 1)

    def matches(self, labels: Sequence[Any], where: dict[str, Any]) -> bool:
        values = self.values
        if len(labels) > len(values) or tuple(values[: len(labels)]) != tuple(labels):
            return False
        return all(k in self.arguments and self.arguments[k] == v for k, v in where.items())


class RecordingMetrics:
    """The run loop's ``PipelineMetrics`` protocol (``RunLoop(metrics=…)``), recording every call as a
    :class:`MetricCall`.

    Contract:

    * Every method of the protocol exists and records ``(name, args)`` in :attr:`log`, in call order, and returns
      ``None``; nothing is aggregated on the way in, so a test can assert on any call. A method the protocol
      gains later is recorded too (looked up by name at call time); any other unknown attribute raises
      ``AttributeError``. Thread-safe (rebalance callbacks may run on the Kafka client's thread).
    * Queries select calls by method ``name``, then by ``labels`` (the leading arguments in parameter order) and
      ``where`` (arguments by parameter name): :meth:`calls` (the matching calls), :meth:`count` (how many),
      :meth:`total` (the sum of their ``n`` argument, 1 for a call without one: the counter's value),
      :meth:`last` (the latest matching call) and :meth:`value` (the first argument after ``labels`` of the latest
      matching call: the gauge's value). For example ``total("traces_closed", "idle")``,
      ``total("store_write", "new")``, ``value("set_lag", "spans", 0)``, ``value("paused", reason="backlog")``.
    * :attr:`observed` holds the ``(run, results)`` pairs of ``observe_results`` (the results the store accepted
      as new), :attr:`results` all those results in order.
    """

    def __init__(self) -> None:
        self.log: list[MetricCall] = []
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ recording

    def record(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Append one call (the protocol methods call this)."""
        arguments: dict[str, Any]
        sig = _signature(name)
        try:
            if sig is None:
                raise TypeError(name)
            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            arguments = dict(bound.arguments)
        except TypeError:
            arguments = {f"arg{i}": v for i, v in enumerate(args)} | dict(kwargs)
        with self._lock:
            self.log.append(MetricCall(name, tuple(args), dict(kwargs), arguments))

    def __getattr__(self, name: str) -> Callable[..., None]:
        if name.startswith("_") or name not in _protocol_methods():
            raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

        def method(*args: Any, **kwargs: Any) -> None:
            self.record(name, args, kwargs)

        return method

    def records_consumed(self, *args: Any, **kwargs: Any) -> None:
        self.record("records_consumed", args, kwargs)

    def spans_decoded(self, *args: Any, **kwargs: Any) -> None:
        self.record("spans_decoded", args, kwargs)

    def record_invalid(self, *args: Any, **kwargs: Any) -> None:
        self.record("record_invalid", args, kwargs)

    def record_dead_lettered(self, *args: Any, **kwargs: Any) -> None:
        self.record("record_dead_lettered", args, kwargs)

    def dead_letter_error(self, *args: Any, **kwargs: Any) -> None:
        self.record("dead_letter_error", args, kwargs)

    def set_dead_letters_pending(self, *args: Any, **kwargs: Any) -> None:
        self.record("set_dead_letters_pending", args, kwargs)

    def traces_closed(self, *args: Any, **kwargs: Any) -> None:
        self.record("traces_closed", args, kwargs)

    def traces_rejected(self, *args: Any, **kwargs: Any) -> None:
        self.record("traces_rejected", args, kwargs)

    def spans_unrecognized(self, *args: Any, **kwargs: Any) -> None:
        self.record("spans_unrecognized", args, kwargs)

    def replays_skipped(self, *args: Any, **kwargs: Any) -> None:
        self.record("replays_skipped", args, kwargs)

    def late_spans(self, *args: Any, **kwargs: Any) -> None:
        self.record("late_spans", args, kwargs)

    def traces_unsampled(self, *args: Any, **kwargs: Any) -> None:
        self.record("traces_unsampled", args, kwargs)

    def record_to_result(self, *args: Any, **kwargs: Any) -> None:
        self.record("record_to_result", args, kwargs)

    def split_traces(self, *args: Any, **kwargs: Any) -> None:
        self.record("split_traces", args, kwargs)

    def commit_done(self, *args: Any, **kwargs: Any) -> None:
        self.record("commit_done", args, kwargs)

    def set_lag(self, *args: Any, **kwargs: Any) -> None:
        self.record("set_lag", args, kwargs)

    def paused(self, *args: Any, **kwargs: Any) -> None:
        self.record("paused", args, kwargs)

    def store_write(self, *args: Any, **kwargs: Any) -> None:
        self.record("store_write", args, kwargs)

    def set_store_available(self, *args: Any, **kwargs: Any) -> None:
        self.record("set_store_available", args, kwargs)

    def runs_sampled(self, *args: Any, **kwargs: Any) -> None:
        self.record("runs_sampled", args, kwargs)

    def forget_partition(self, *args: Any, **kwargs: Any) -> None:
        self.record("forget_partition", args, kwargs)

    def observe_results(self, *args: Any, **kwargs: Any) -> None:
        self.record("observe_results", args, kwargs)

    def set_open_traces(self, *args: Any, **kwargs: Any) -> None:
        self.record("set_open_traces", args, kwargs)

    def observe_verdicts(self, *args: Any, **kwargs: Any) -> None:
        self.record("observe_verdicts", args, kwargs)

    # the judge pool's metrics (``monitor.judging.pool.JudgeMetrics``)

    def judge_request(self, judge: str, model: str, outcome: str, seconds: float | None) -> None:
        self.record("judge_request", (), {"judge": judge, "model": model, "outcome": outcome, "seconds": seconds})

    def judge_usage(self, judge: str, model: str, usage: Any, usd: float | None) -> None:
        self.record("judge_usage", (), {"judge": judge, "model": model, "usage": usage, "usd": usd})

    def judge_dropped(self, judge: str, reason: str, n: int = 1) -> None:
        self.record("judge_dropped", (), {"judge": judge, "reason": reason, "n": n})

    def set_judge_backlog(self, n: int) -> None:
        self.record("set_judge_backlog", (), {"n": n})

    def set_judge_budget_remaining(self, remaining: Any) -> None:
        self.record("set_judge_budget_remaining", (), {"remaining": remaining})

    # ------------------------------------------------------------------ queries

    def calls(self, name: str, *labels: Any, **where: Any) -> list[MetricCall]:
        """The calls of method ``name`` whose leading arguments are ``labels`` and named arguments ``where``."""
        with self._lock:
            log = list(self.log)
        return [c for c in log if c.name == name and c.matches(labels, where)]

    def count(self, name: str, *labels: Any, **where: Any) -> int:
        """How many calls :meth:`calls` selects."""
        return len(self.calls(name, *labels, **where))

    def total(self, name: str, *labels: Any, **where: Any) -> float:
        """The sum of ``n`` over the selected calls (a counter's value); 0 when none."""
        return float(sum(c.n for c in self.calls(name, *labels, **where)))

    def last(self, name: str, *labels: Any, **where: Any) -> MetricCall | None:
        """The latest selected call, or None."""
        found = self.calls(name, *labels, **where)
        return found[-1] if found else None

    def value(self, name: str, *labels: Any, **where: Any) -> Any:
        """The first argument after ``labels`` of the latest selected call (a gauge's value); None when none."""
        call = self.last(name, *labels, **where)
        if call is None:
            return None
        values = call.values
        return values[len(labels)] if len(values) > len(labels) else None

    def names(self) -> Counter[str]:
        """How many times each method was called."""
        with self._lock:
            return Counter(c.name for c in self.log)

    @property
    def observed(self) -> list[tuple[Run, list[ScoreResult]]]:
        """``(run, results)`` of every ``observe_results`` call, in order."""
        out: list[tuple[Run, list[ScoreResult]]] = []
        for c in self.calls("observe_results"):
            values = c.values
            out.append((values[0], list(values[1])))
        return out

    @property
    def results(self) -> list[ScoreResult]:
        """Every result passed to ``observe_results``, in order."""
        return [r for _, results in self.observed for r in results]

    def clear(self) -> None:
        """Forget every recorded call."""
        with self._lock:
            self.log.clear()

    def __repr__(self) -> str:
        return f"RecordingMetrics({dict(self.names())})"
