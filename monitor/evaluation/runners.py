"""Where the actual trajectories of golden cases come from (SCORING.md §6.6).

A :class:`Runner` turns one :class:`~monitor.rules.datasets.model.Case` into one
:class:`~monitor.trajectory.model.Run` per turn, in order, or raises :class:`RunnerFailed` (the
gate then reports the case's results as ``error/runner_failed``). Every runner rebuilds its runs
from OpenTelemetry spans with the daemon's own decoder and trajectory builder, so an evaluated run
and a production run of the same agent are the same object.

* :func:`in_process_runner` — a Python callable (``module:callable``) run in this process, spans
  captured in memory from the global tracer provider;
* :func:`anthropic_executor` — the seed articles' executors on Anthropic's Messages API:
  ``select`` (seed-001, one call, tools selected but not executed) and ``loop`` (seed-000, the
  tool-use loop with stubbed tool results);
* :func:`command_runner` — ``--runner CMD``: a command per case × run exporting OTLP/HTTP to a
  receiver on 127.0.0.1.

Runs returned by every runner carry ``monitor.eval.case_id``, ``monitor.eval.turn`` and
``monitor.eval.run`` in ``Run.attributes``. Constructors raise ``RunnerFailed("config", …)`` when
the runner cannot be set up; :meth:`Runner.run` raises the other reasons of
:data:`RUNNER_FAILURE_REASONS`. See docs/runners.md.
"""

from __future__ import annotations

from monitor.evaluation.runner_anthropic import AnthropicExecutor, anthropic_executor, mock_tool_execution
from monitor.evaluation.runner_command import CommandRunner, OtlpReceiver, command_runner
from monitor.evaluation.runner_common import (
    CONTENT_CAPTURE_ENV,
    RUNNER_FAILURE_REASONS,
    Runner,
    RunnerFailed,
    case_payload,
)
from monitor.evaluation.runner_inprocess import InProcessRunner, in_process_runner

__all__ = [
    "CONTENT_CAPTURE_ENV",
    "RUNNER_FAILURE_REASONS",
    "AnthropicExecutor",
    "CommandRunner",
    "InProcessRunner",
    "OtlpReceiver",
    "Runner",
    "RunnerFailed",
    "anthropic_executor",
    "case_payload",
    "command_runner",
    "in_process_runner",
    "mock_tool_execution",
]
