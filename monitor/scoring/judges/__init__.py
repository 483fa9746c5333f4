"""The LLM judges of SCORING.md §4, as pure code: request rendering, verdict validation, the exchange state
machine and each peer's rule from verdict to score. No I/O: the API call is injected
(:func:`~monitor.scoring.judges.base.run_judge`; ``monitor.judging.runner`` on the real SDK).

The catalogue (:mod:`monitor.scoring.catalogue`) finds the judge classes here; they replace the judges'
declarations."""

from monitor.scoring.judges.argument_correctness import ArgumentCorrectnessJudge
from monitor.scoring.judges.base import Judge, JudgeParams, JudgeUnavailable, Prepared, run_judge
from monitor.scoring.judges.goal_accuracy import GoalAccuracyJudge
from monitor.scoring.judges.protocol import JudgeConfig
from monitor.scoring.judges.tool_selection import ToolSelectionJudge
from monitor.scoring.judges.topic_adherence import TopicAdherenceJudge
from monitor.scoring.judges.trajectory_quality import TrajectoryQualityJudge

JUDGES = (
    ToolSelectionJudge,
    ArgumentCorrectnessJudge,
    GoalAccuracyJudge,
    TopicAdherenceJudge,
    TrajectoryQualityJudge,
)
"""Every §4 judge class, in SCORING.md order."""

__all__ = [
    "JUDGES",
    "ArgumentCorrectnessJudge",
    "GoalAccuracyJudge",
    "Judge",
    "JudgeConfig",
    "JudgeParams",
    "JudgeUnavailable",
    "Prepared",
    "ToolSelectionJudge",
    "TopicAdherenceJudge",
    "TrajectoryQualityJudge",
    "run_judge",
]
