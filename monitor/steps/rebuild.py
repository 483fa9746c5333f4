"""Rebuild: a closed trace's runs (:func:`~monitor.trajectory.build.build_runs`), or why there are none.

* A trace an earlier reading already handled (its replay mark is known) is marked ``replayed`` and not rebuilt.
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
from monitor.steps.work import TraceWork
from monitor.trajectory.build import RebuildRejected, build_runs

log = logging.getLogger(__name__)

Work = TraceWork | None


class RebuildStep(TransformStep[Work, Work]):
    """Fills ``TraceWork.runs`` (or ``replayed`` / ``rejected``); never rejects unless the next step does."""

    def __init__(self, next_step: Step[Work], settings: Settings, *, guard: ReplayGuard) -> None:
        super().__init__(next_step)
        self.guard = guard
        self.max_depth = settings.rebuild.max_depth
        self.max_agent_depth = settings.rebuild.max_agent_depth

    def process(self, message: Message[Work]) -> Message[Work]:
        if message.payload is not None:
            self._rebuild(message.payload)
        return message

    def _rebuild(self, work: TraceWork) -> None:
        closed = work.closed
        if self.guard.handled_trace(closed):
            work.replayed = True
            return
        try:
            work.runs = build_runs(
                closed.spans,
                closed.logs,
                forced=closed.reason if closed.forced else None,
                max_depth=self.max_depth,
                max_agent_depth=self.max_agent_depth,
                unrecognized=work.unrecognized,
            )
        except RebuildRejected as exc:
            log.warning("trace %s not rebuilt (%s): %s", closed.trace_id, exc.reason, exc)
            work.rejected = exc.reason
        except Exception as exc:  # a bug in the rebuild must not stop the daemon: count it, move on
            log.error("could not rebuild trace %s: %s: %s", closed.trace_id, type(exc).__name__, str(exc)[:200])
            log.debug("rebuild failure of trace %s", closed.trace_id, exc_info=True)
            work.rejected = "rebuild_failed"
