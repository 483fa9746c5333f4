"""``ragas_topic_adherence``: code form of Ragas ``TopicAdherenceScore`` (SCORING.md §2.10).

Peer: ragas 0.4.3, ``ragas/metrics/_topic_adherence.py`` (``_compute_score``: TP/FP/FN over the
per-topic "answered" and "on topic" verdicts, with Ragas' ``1e-10`` epsilons). The labels come
from the expectation (``topic_labels``: a dataset, or the judge of §4.4).

Ragas returns 0.0 without topics; here ``not_applicable/no_topics`` unless ``empty_score`` is set.
The conversation is scored as a whole (``turn_mode = "concatenate"``: labels of all turns).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Literal

from monitor.scoring.base import (
    Evaluation,
    Need,
    NotScored,
    Outcome,
    Scorer,
    ScorerParams,
    Threshold,
    merge_expectations,
)
from monitor.scoring.expectation import Expectation, TopicLabel
from monitor.scoring.result import FailureKind, Issue
from monitor.trajectory.model import Run

__all__ = ["RagasTopicAdherence", "RagasTopicAdherenceParams", "topic_adherence"]


class RagasTopicAdherenceParams(ScorerParams):
    mode: Literal["precision", "recall", "f1"] = "f1"
    empty_score: Threshold | None = None
    threshold: Threshold = 0.8


def topic_adherence(labels: Sequence[TopicLabel], mode: str) -> tuple[float, int, int, int]:
    """Ragas' score and (TP, FP, FN) for the labels."""
    tp = sum(1 for t in labels if t.answered and t.on_topic)
    fp = sum(1 for t in labels if t.answered and not t.on_topic)
    fn = sum(1 for t in labels if not t.answered and t.on_topic)
    precision = tp / (tp + fp + 1e-10)
    recall = tp / (tp + fn + 1e-10)
    if mode == "precision":
        return precision, tp, fp, fn
    if mode == "recall":
        return recall, tp, fp, fn
    return 2 * (precision * recall) / (precision + recall + 1e-10), tp, fp, fn


class RagasTopicAdherence(Scorer[RagasTopicAdherenceParams]):
    """Ragas TopicAdherenceScore counting: precision / recall / F1 of answered on-topic queries."""

    kind: ClassVar[str] = "ragas_topic_adherence"
    version: ClassVar[int] = 1
    Params = RagasTopicAdherenceParams
    needs = frozenset({Need.TOPIC_LABELS})
    turn_mode = "concatenate"
    summary = "Ragas TopicAdherenceScore (code form) over topic labels (§2.10)"

    def variant(self) -> str | None:
        return None if self.params.mode == "f1" else self.params.mode

    def evaluate(self, run: Run, reference: Expectation | None) -> Evaluation:
        labels = reference.topic_labels if reference is not None else None
        if not labels:
            if self.params.empty_score is not None:
                return Outcome(self.params.empty_score, details={"topics": 0})
            return NotScored.na("no_topics")
        score, tp, fp, fn = topic_adherence(labels, self.params.mode)
        issues = [
            Issue(FailureKind.OFF_TOPIC, detail={"topic": t.topic}) for t in labels if t.answered and not t.on_topic
        ] + [
            Issue(FailureKind.OVER_REFUSAL, detail={"topic": t.topic}) for t in labels if not t.answered and t.on_topic
        ]
        return Outcome(score, issues=tuple(issues), details={"tp": tp, "fp": fp, "fn": fn, "topics": len(labels)})

    def evaluate_conversation(self, runs: Sequence[Run], references: Sequence[Expectation | None]) -> Evaluation:
        return self.evaluate(runs[-1], merge_expectations(references))
