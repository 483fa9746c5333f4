"""Run a user's agent callable in this process and capture its spans in memory (SCORING.md §6.6,
"the Python API takes a callable and an in-memory span exporter").

Calling convention (see docs/runners.md)::

    def agent(input: str, *, case_id: str, turn: int, history: list[dict[str, str]]) -> Any

``input`` is the text of the turn's user message(s); ``history`` the conversation before this turn
as ``[{"role": "user" | "assistant", "content": str}]`` (each earlier turn's input, then the agent's
answer to it: the callable's return value when it is a ``str``, else the rebuilt run's final
response). The keyword arguments are passed only when the callable declares them (or ``**kwargs``),
so ``def agent(text: str)`` works too; ``run: int`` and ``session_input`` (ADK ``session_input``)
are passed the same way when declared. ``async def`` callables (or callables returning an
awaitable) are awaited on a private event loop. The return value is used only for ``history``.

Span capture: the OTel API lets a process set its global tracer provider once, so the first runner
installs one process-wide SDK provider (or, when the application already set an SDK provider,
attaches to it) with a processor that forwards each finished span to the capture that registered
its trace id. Each turn runs under a root span ``monitor.eval turn`` carrying
``monitor.eval.case_id`` / ``monitor.eval.turn`` / ``monitor.eval.run``, in a fresh trace, so
concurrent captures never mix. Instrumentations must use the global provider (``Agent.instrument_all()``,
an ``Instrumentation`` capability without a provider, ``XInstrumentor().instrument()``, …).

Which run is the turn's run: the top-level runs of the root span's trace (nested agent runs stay in
``Run.children``, so with nested agents the outermost agent run is chosen); agent-rooted runs win
over bare model/tool subtrees; when the callable emitted model and tool spans but no agent span,
the root span itself is the run's root. Several top-level agent runs → ``ambiguous_run`` (wrap them
in one agent span). When the root's trace has no run at all — the framework ran the agent on a
thread without the OTel context — the only run among the other traces that ended during the turn
is taken; none → ``missing_run``.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import inspect
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.trace import Status, StatusCode

from monitor.evaluation.runner_common import (
    RunnerFailed,
    content_capture_env,
    prefer_agent_runs,
    rebuild,
    spans_to_records,
    turn_messages,
    with_eval_attributes,
)
from monitor.trajectory.semconv import Monitor

if TYPE_CHECKING:
    from monitor.rules.datasets.model import Case
    from monitor.trajectory.model import Run

ROOT_SPAN_NAME: Final = "monitor.eval turn"
TRACER_NAME: Final = "monitor.evaluation"
OPTIONAL_KWARGS: Final = ("case_id", "turn", "history", "run", "session_input")


# --------------------------------------------------------------------------- global capture


class _Capture:
    """Spans of the traces a turn registered, plus spans of unregistered traces (strays)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.spans: list[ReadableSpan] = []
        self.strays: list[ReadableSpan] = []

    def snapshot(self) -> tuple[list[ReadableSpan], list[ReadableSpan]]:
        with self.lock:
            return list(self.spans), list(self.strays)


class _Router(SpanProcessor):
    """Forwards spans ended on the global provider: by trace id to the capture that registered the
    trace, and spans of unregistered traces to every open capture as strays."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_trace: dict[int, _Capture] = {}
        self.open: list[_Capture] = []
        self.retired: set[int] = set()  # traces of abandoned (timed-out) turns: their late spans are dropped

    def on_end(self, span: ReadableSpan) -> None:
        ctx = span.context
        if ctx is None:
            return
        with self.lock:
            if ctx.trace_id in self.retired:
                return
            owner = self.by_trace.get(ctx.trace_id)
            targets = [] if owner is not None else list(self.open)
        if owner is not None:
            with owner.lock:
                owner.spans.append(span)
        for cap in targets:
            with cap.lock:
                cap.strays.append(span)

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True

    @contextmanager
    def capture(self) -> Iterator[_Capture]:
        cap = _Capture()
        with self.lock:
            self.open.append(cap)
        try:
            yield cap
        finally:
            with self.lock:
                self.open.remove(cap)
                for trace_id in [t for t, c in self.by_trace.items() if c is cap]:
                    del self.by_trace[trace_id]

    def register(self, trace_id: int, cap: _Capture) -> None:
        with self.lock:
            self.by_trace[trace_id] = cap

    def retire(self, trace_id: int) -> None:
        """Drop every later span of ``trace_id`` (a turn that was abandoned still running)."""
        with self.lock:
            self.retired.add(trace_id)
            self.by_trace.pop(trace_id, None)


_ROUTER: Final = _Router()
_INSTALL_LOCK: Final = threading.Lock()
_installed: list[Any] = []


def install_global_capture() -> Any:
    """Attach the router to the process's global SDK tracer provider, installing one when the
    application set none. Idempotent; returns the provider. Raises :class:`RunnerFailed`
    (``config``) when the global provider is not an SDK provider we can attach a processor to."""
    with _INSTALL_LOCK:
        if _installed:
            return _installed[0]
        provider: Any = trace.get_tracer_provider()
        if not hasattr(provider, "add_span_processor"):
            ours = TracerProvider(resource=Resource.create({"service.name": "monitor-eval"}))
            trace.set_tracer_provider(ours)  # refused (with a warning) if someone set one meanwhile
            provider = trace.get_tracer_provider()
            if not hasattr(provider, "add_span_processor"):
                raise RunnerFailed(
                    "config", f"the global tracer provider {type(provider).__name__} does not accept span processors"
                )
        provider.add_span_processor(_ROUTER)
        _installed.append(provider)
        return provider


# --------------------------------------------------------------------------- loading the callable


def load_callable(spec: str) -> Callable[..., Any]:
    """``module:attr`` (``attr`` may be dotted) or ``path/to/file.py:attr``. The current directory
    is put on ``sys.path`` (as ``python -m`` does). Raises :class:`RunnerFailed` (``config``)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise RunnerFailed("config", f"runner spec {spec!r} is not 'module:callable'")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        if module_name.endswith(".py") or os.sep in module_name or "/" in module_name:
            path = Path(module_name).resolve()
            loader_spec = importlib.util.spec_from_file_location(f"monitor_eval_agent_{path.stem}", path)
            if loader_spec is None or loader_spec.loader is None:
                raise RunnerFailed("config", f"cannot load {path}")
            module = importlib.util.module_from_spec(loader_spec)
            sys.modules[loader_spec.name] = module
            loader_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
    except RunnerFailed:
        raise
    except Exception as exc:
        raise RunnerFailed("config", f"cannot import {module_name!r}: {type(exc).__name__}: {exc}") from exc
    target: Any = module
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError as exc:
            raise RunnerFailed("config", f"{module_name!r} has no attribute {attr!r}") from exc
    if not callable(target):
        raise RunnerFailed("config", f"{spec!r} is not callable")
    fn: Callable[..., Any] = target
    return fn


def _accepted_kwargs(fn: Callable[..., Any]) -> frozenset[str] | None:
    """The optional keyword arguments ``fn`` declares; ``None`` = all (``**kwargs``)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return frozenset()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return frozenset(
        p.name
        for p in params
        if p.name in OPTIONAL_KWARGS
        and p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    )


# --------------------------------------------------------------------------- one turn


@dataclass
class _TurnOutcome:
    done: threading.Event = field(default_factory=threading.Event)
    value: Any = None
    error: BaseException | None = None
    timed_out: bool = False
    trace_id: int | None = None
    elapsed: float = 0.0


def _call(fn: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any], timeout_s: float) -> Any:
    """Call ``fn``; an awaitable result is awaited on a private loop and cancelled at the timeout."""
    if inspect.iscoroutinefunction(fn):
        return asyncio.run(asyncio.wait_for(fn(*args, **kwargs), timeout_s))
    value = fn(*args, **kwargs)
    if inspect.isawaitable(value):
        awaitable = value

        async def wait() -> Any:
            return await asyncio.wait_for(awaitable, timeout_s)

        return asyncio.run(wait())
    return value


class InProcessRunner:
    """See the module docstring. Build it with :func:`in_process_runner`."""

    def __init__(self, spec: str, fn: Callable[..., Any], timeout_s: float) -> None:
        self.name = f"in_process:{spec}"
        self.spec = spec
        self.fn = fn
        self.timeout_s = timeout_s
        self._kwargs = _accepted_kwargs(fn)
        self._tracer = trace.get_tracer(TRACER_NAME)

    def run(self, case: Case, run_no: int) -> list[Run]:
        """One run per turn, in order; the whole case must finish within ``timeout_s``."""
        deadline = time.monotonic() + self.timeout_s
        history: list[dict[str, str]] = []
        runs: list[Run] = []
        with content_capture_env():
            for turn_no, turn in enumerate(case.turns):
                kwargs: dict[str, Any] = {
                    "case_id": case.id,
                    "turn": turn_no,
                    "history": [dict(m) for m in history],
                    "run": run_no,
                    "session_input": turn.session_input,
                }
                if self._kwargs is not None:
                    kwargs = {k: v for k, v in kwargs.items() if k in self._kwargs}
                value, run = self._turn(case.id, turn_no, run_no, turn.text, kwargs, deadline)
                runs.append(run)
                history.extend(m for m in turn_messages(turn) if m["role"] in ("user", "assistant"))
                answer = value if isinstance(value, str) else run.final_response
                history.append({"role": "assistant", "content": answer or ""})
        return runs

    def _turn(
        self, case_id: str, turn_no: int, run_no: int, text: str, kwargs: Mapping[str, Any], deadline: float
    ) -> tuple[Any, Run]:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise RunnerFailed("timeout", f"case {case_id!r} exceeded {self.timeout_s:g} s before turn {turn_no}")
        outcome = _TurnOutcome()
        with _ROUTER.capture() as cap:
            worker = threading.Thread(
                target=self._work,
                args=(cap, outcome, case_id, turn_no, run_no, text, kwargs, remaining),
                name=f"monitor-eval-{case_id}-{turn_no}",
                daemon=True,
            )
            worker.start()
            finished = outcome.done.wait(remaining + 1.0)
            # a sync call cannot be interrupted: one that returned after the deadline still timed out
            if not finished or outcome.timed_out or outcome.elapsed > remaining:
                if outcome.trace_id is not None:
                    _ROUTER.retire(outcome.trace_id)
                raise RunnerFailed(
                    "timeout", f"case {case_id!r} turn {turn_no} did not finish within {self.timeout_s:g} s"
                )
            if outcome.error is not None:
                err = outcome.error
                raise RunnerFailed("exception", f"{type(err).__name__}: {err}") from err
            spans, strays = cap.snapshot()
        run = self._pick(case_id, turn_no, spans, strays)
        return outcome.value, with_eval_attributes(run, case_id, turn_no, run_no)

    def _work(
        self,
        cap: _Capture,
        outcome: _TurnOutcome,
        case_id: str,
        turn_no: int,
        run_no: int,
        text: str,
        kwargs: Mapping[str, Any],
        timeout_s: float,
    ) -> None:
        attributes: dict[str, str | int] = {Monitor.CASE_ID: case_id, Monitor.TURN: turn_no, Monitor.RUN: run_no}
        # a fresh context: the root span starts a trace of its own, whatever span is current here
        root = self._tracer.start_span(ROOT_SPAN_NAME, context=otel_context.Context(), attributes=attributes)
        outcome.trace_id = root.get_span_context().trace_id
        _ROUTER.register(outcome.trace_id, cap)
        started = time.monotonic()
        try:
            with trace.use_span(root, end_on_exit=False):
                outcome.value = _call(self.fn, (text,), kwargs, timeout_s)
        except TimeoutError as exc:
            # ours (asyncio.wait_for at the deadline) or the agent's own, which is an exception
            outcome.timed_out = time.monotonic() - started >= timeout_s * 0.999
            root.set_status(Status(StatusCode.ERROR, "timeout"))
            outcome.error = exc
        except BaseException as exc:  # the agent's failure is the runner's result, not a crash here
            root.record_exception(exc)
            root.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
            outcome.error = exc
        finally:
            outcome.elapsed = time.monotonic() - started
            root.end()
            outcome.done.set()

    def _pick(self, case_id: str, turn_no: int, spans: list[ReadableSpan], strays: list[ReadableSpan]) -> Run:
        where = f"case {case_id!r} turn {turn_no}"
        records = spans_to_records(spans)
        runs = prefer_agent_runs(rebuild(records), records)
        if len(runs) == 1:
            return runs[0]
        if len(runs) > 1:
            names = ", ".join(repr(r.agent) for r in runs)
            raise RunnerFailed(
                "ambiguous_run", f"{where}: {len(runs)} top-level agent runs ({names}); wrap them in one agent span"
            )
        stray_records = spans_to_records(strays)
        stray_runs = prefer_agent_runs(rebuild(stray_records), stray_records)
        if len(stray_runs) == 1:
            return stray_runs[0]
        hint = (
            f"; {len(stray_runs)} runs in other traces"
            if stray_runs
            else "; is the instrumentation using the global tracer provider?"
        )
        raise RunnerFailed("missing_run", f"{where}: no agent run was captured{hint}")


def in_process_runner(spec: str, *, timeout_s: float = 300.0) -> InProcessRunner:
    """A runner calling ``spec`` (``module:callable``) in this process, one call per turn.

    The content-capture switches (:data:`~monitor.evaluation.runner_common.CONTENT_CAPTURE_ENV`)
    the environment lacks are set while the module is imported and while each case runs, then
    removed. The global span capture is installed after the import, so an application that sets
    its own SDK tracer provider at import time keeps it (the capture attaches to it). Raises
    :class:`RunnerFailed` (``config``) when the callable cannot be loaded.
    """
    if timeout_s <= 0:
        raise RunnerFailed("config", f"timeout_s must be positive, got {timeout_s!r}")
    with content_capture_env():
        fn = load_callable(spec)
    install_global_capture()
    return InProcessRunner(spec, fn, timeout_s)
