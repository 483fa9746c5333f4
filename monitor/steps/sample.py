"""Sample: whether each run of a trace is scored, decided once, here (``sampling`` settings: always-rules for
errored runs and attributes, then a deterministic draw against the agent's rate). A run not sampled still goes on
(its offsets move, it is counted as ``skipped`` in ``monitor_runs_sampled_total``); the score step scores only the
runs sampled here."""

from __future__ import annotations

import logging

from monitor.steps.contract import Message, Step, TransformStep
from monitor.steps.work import SamplingPolicy, TraceWork
from monitor.trajectory.model import Run

log = logging.getLogger(__name__)

Work = TraceWork | None


def decide_runs(work: TraceWork, policy: SamplingPolicy) -> None:
    """Fill ``work.sampled``: one decision per top-level run; a sampling bug scores the run (and says so)."""
    if work.runs:
        work.sampled = [_decide(policy, run) for run in work.runs]


def _decide(policy: SamplingPolicy, run: Run) -> bool:
    try:
        return policy.should_score(run).sampled
    except Exception:  # a sampling bug must not stop the daemon: score the run (and say so)
        log.exception("sampling failed for trace %s run %s; scoring the run", run.trace_id, run.run_id)
        return True


class SampleStep(TransformStep[Work, Work]):
    """Fills ``TraceWork.sampled`` (one decision per top-level run)."""

    def __init__(self, next_step: Step[Work], policy: SamplingPolicy) -> None:
        super().__init__(next_step)
        self.policy = policy

    def process(self, message: Message[Work]) -> Message[Work]:
        if message.payload is not None:
            decide_runs(message.payload, self.policy)
        return message
