"""Rebuild: a closed trace's runs (:func:`~monitor.trajectory.build.build_runs`), or why there are none.

* A trace an earlier reading already handled (its replay mark is known) is marked ``replayed`` and not rebuilt.
* **Sampling before the rebuild.** A trace none of whose runs could be sampled
  (:meth:`~monitor.steps.work.TraceSampling.trace_needed` is False: its draw is above every rate and nothing
  flags it as errored) is marked ``unsampled`` and neither decoded (lazy records stay bytes) nor rebuilt; the
  observe step counts it in ``monitor_traces_unsampled_total``.
* Otherwise the trace's spans are materialized (the deferred records decoded now, in the same pass as the
  rebuild) and rebuilt.
* A trace the rebuild refuses (deeper than ``rebuild.max_depth`` / ``max_agent_depth``) is ``rejected`` as
  ``too_deep``, one warning line; a trace the rebuild fails on is ``rejected`` as ``rebuild_failed``, one error
  line (the traceback at debug level). Either way it goes on with no runs: its offsets still move and the observe
  step counts it in ``monitor_traces_rejected_total``.
* Spans that no known convention recognizes, in a trace that gave no run of a known convention, are counted per
  instrumentation scope in ``TraceWork.unrecognized`` (the observe step turns them into
  ``monitor_spans_unrecognized_total``).
"""

from __future__ import annotations

import logging

from monitor.ingest.replay import ReplayGuard
from monitor.settings import Settings
from monitor.steps.contract import Message, Step, TransformStep
from monitor.steps.work import TraceSampling, TraceWork
from monitor.trajectory.assembler import ClosedTrace
from monitor.trajectory.build import RebuildRejected, build_runs

log = logging.getLogger(__name__)

Work = TraceWork | None


def triage(work: TraceWork, guard: ReplayGuard, sampling: TraceSampling | None) -> bool:
    """Whether ``work`` goes on to its rebuild: False (and ``replayed`` or ``unsampled`` set) for a trace an earlier
    reading handled or none of whose runs could be sampled. Cheap: it reads no span."""
    closed = work.closed
    if guard.handled_trace(closed):
        work.replayed = True
        return False
    if sampling is not None and not _needed(sampling, closed):
        work.unsampled = True
        return False
    return True


def _needed(sampling: TraceSampling, closed: ClosedTrace) -> bool:
    try:
        return sampling.trace_needed(closed.trace_id, closed.flagged)
    except Exception:  # a sampling bug must not stop the daemon: rebuild the trace (and say so)
        log.exception("trace-level sampling failed for trace %s; rebuilding it", closed.trace_id)
        return True


def rebuild_runs(work: TraceWork, max_depth: int, max_agent_depth: int) -> None:
    """Fill ``work.runs`` from the trace's spans (the deferred records decoded now), or ``work.rejected``; never
    raises (module docstring)."""
    closed = work.closed
    try:
        work.runs = build_runs(
            closed.materialize(),
            closed.logs,
            forced=closed.reason if closed.forced else None,
            max_depth=max_depth,
            max_agent_depth=max_agent_depth,
            unrecognized=work.unrecognized,
        )
    except RebuildRejected as exc:
        log.warning("trace %s not rebuilt (%s): %s", closed.trace_id, exc.reason, exc)
        work.rejected = exc.reason
    except Exception as exc:  # a bug in the rebuild must not stop the daemon: count it, move on
        log.error("could not rebuild trace %s: %s: %s", closed.trace_id, type(exc).__name__, str(exc)[:200])
        log.debug("rebuild failure of trace %s", closed.trace_id, exc_info=True)
        work.rejected = "rebuild_failed"


class RebuildStep(TransformStep[Work, Work]):
    """Fills ``TraceWork.runs`` (or ``replayed`` / ``unsampled`` / ``rejected``); never rejects unless the next step
    does."""

    def __init__(
        self, next_step: Step[Work], settings: Settings, *, guard: ReplayGuard, sampling: TraceSampling | None = None
    ) -> None:
        super().__init__(next_step)
        self.guard = guard
        self.sampling = sampling
        self.max_depth = settings.rebuild.max_depth
        self.max_agent_depth = settings.rebuild.max_agent_depth

    def process(self, message: Message[Work]) -> Message[Work]:
        work = message.payload
        if work is not None and triage(work, self.guard, self.sampling):
            rebuild_runs(work, self.max_depth, self.max_agent_depth)
        return message
