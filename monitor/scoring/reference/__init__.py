"""Reference-based code scorers (SCORING.md §2): one module per peer."""

from monitor.scoring.reference.adk_response_match import AdkResponseMatch
from monitor.scoring.reference.adk_trajectory import AdkToolTrajectory
from monitor.scoring.reference.deepeval_tool_correctness import DeepEvalToolCorrectness
from monitor.scoring.reference.mastra_tool_call_accuracy import MastraToolCallAccuracy
from monitor.scoring.reference.ragas_tool_call import RagasToolCallAccuracy, RagasToolCallF1
from monitor.scoring.reference.tool_eval import ToolEval
from monitor.scoring.reference.tool_selection import ToolsAvoided, ToolSelectionF1, ToolsSelected
from monitor.scoring.reference.topic_adherence import RagasTopicAdherence
from monitor.scoring.reference.trajectory_match import TrajectoryMatch

REFERENCE_SCORERS = (
    ToolEval,
    ToolsSelected,
    ToolsAvoided,
    ToolSelectionF1,
    TrajectoryMatch,
    AdkToolTrajectory,
    RagasToolCallAccuracy,
    RagasToolCallF1,
    MastraToolCallAccuracy,
    DeepEvalToolCorrectness,
    AdkResponseMatch,
    RagasTopicAdherence,
)
"""Every §2 scorer class, in SCORING.md order."""

__all__ = [
    "REFERENCE_SCORERS",
    "AdkResponseMatch",
    "AdkToolTrajectory",
    "DeepEvalToolCorrectness",
    "MastraToolCallAccuracy",
    "RagasToolCallAccuracy",
    "RagasToolCallF1",
    "RagasTopicAdherence",
    "ToolEval",
    "ToolSelectionF1",
    "ToolsAvoided",
    "ToolsSelected",
    "TrajectoryMatch",
]
