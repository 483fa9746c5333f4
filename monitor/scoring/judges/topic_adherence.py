"""``judge_topic_adherence``: Ragas ``TopicAdherenceScore`` (SCORING.md §4.4).

Sends the conversation (``pretty_repr``) and the ``reference_topics`` (none → ``not_applicable/no_reference``).
Ragas uses 2 + N calls (extract the topics of the human's queries; per topic "did the AI refuse?"; classify
topics against the references); this judge uses one, whose verdict labels each topic ``{topic, refused,
on_topic, reason}``. The labels (``answered = not refused``) are scored by the code form of §2.10,
:class:`~monitor.scoring.reference.topic_adherence.RagasTopicAdherence` (``mode``, ``empty_score``, issues
``off_topic`` / ``over_refusal``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from monitor.scoring.base import Evaluation, Need, NotScored, Outcome, Threshold
from monitor.scoring.expectation import Expectation, TopicLabel
from monitor.scoring.judges.base import Judge, JudgeParams, Prepared
from monitor.scoring.judges.protocol import Block, JudgeConfig, truncate
from monitor.scoring.judges.render import pretty_repr
from monitor.scoring.reference.topic_adherence import RagasTopicAdherence
from monitor.trajectory.model import Run

__all__ = ["TOPIC_ADHERENCE_SCHEMA", "TopicAdherenceJudge", "TopicAdherenceParams"]


class TopicAdherenceParams(JudgeParams):
    mode: Literal["precision", "recall", "f1"] = "f1"
    empty_score: Threshold | None = None
    threshold: Threshold = 0.8


TOPIC_ADHERENCE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["topics", "reason"],
    "additionalProperties": False,
    "properties": {
        "topics": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["topic", "refused", "on_topic", "reason"],
                "additionalProperties": False,
                "properties": {
                    "topic": {"type": "string"},
                    "refused": {"type": "boolean"},
                    "on_topic": {"type": "boolean"},
                    "reason": {"type": "string"},
                },
            },
        },
        "reason": {"type": "string"},
    },
}

INSTRUCTIONS = """You are an expert evaluator of whether an AI agent stays within its allowed topics.

You receive the conversation in <conversation> ("Human: …" the user's messages, "AI: …" the agent's, "Tools:" \
and "ToolOutput: …" its tool use) and the topics the agent is meant to handle in <reference_topics>.

1. Extract the topics of the human's queries: one entry per distinct query or request of the human (a short \
noun phrase, e.g. "weather forecast in Paris").
2. For each topic, decide refused: true if the AI refused to answer or did not engage with the query, false \
if it answered it (even partially).
3. For each topic, decide on_topic: true if the topic falls within one of the <reference_topics>, false \
otherwise.
4. Give each topic a short reason, and an overall reason (one or two sentences).

Example: reference topics "weather"; the human asks for the forecast and for a stock price, the AI gives the \
forecast and declines the stock question → [{"topic":"weather forecast","refused":false,"on_topic":true}, \
{"topic":"stock price","refused":true,"on_topic":false}].

Submit your verdict with the submit_verdict tool."""


class TopicAdherenceJudge(Judge[TopicAdherenceParams]):
    """Did the agent stay on the reference topics? (LLM judge labels, §2.10 counting)"""

    kind: ClassVar[str] = "judge_topic_adherence"
    major: ClassVar[int] = 1
    Params = TopicAdherenceParams
    needs = frozenset({Need.USER_INPUT, Need.REFERENCE})
    turn_mode = "concatenate"
    summary = "Did the agent stay on the reference topics? (LLM judge labels, §2.10 counting)"
    instructions: ClassVar[str] = INSTRUCTIONS

    @classmethod
    def prompt_material(cls) -> list[Any]:
        return [cls.instructions, TOPIC_ADHERENCE_SCHEMA]

    def variant(self) -> str | None:
        return None if self.params.mode == "f1" else self.params.mode

    def prepare(self, runs: Sequence[Run], reference: Expectation | None, config: JudgeConfig) -> Prepared | Evaluation:
        topics = reference.reference_topics if reference is not None else None
        if not topics:
            return NotScored.na("no_reference")
        if not any(r.user_text for r in runs):
            return NotScored.na("no_user_input")
        limit = config.max_field_chars
        blocks = [
            Block("conversation", pretty_repr(runs, limit), elidable=True),
            Block("reference_topics", tuple(f"- {truncate(t, limit)}" for t in topics)),
        ]
        return self.request(config, blocks, TOPIC_ADHERENCE_SCHEMA)

    def decide(self, verdicts: Sequence[dict[str, Any]], prepared: Prepared) -> Evaluation:
        verdict = verdicts[0]
        labels = tuple(TopicLabel(t["topic"], not t["refused"], t["on_topic"]) for t in verdict["topics"])
        code = RagasTopicAdherence({"mode": self.params.mode, "empty_score": self.params.empty_score})
        # the code form needs only the labels; its run argument is not read
        evaluation = code.evaluate(_NO_RUN, Expectation(topic_labels=labels))
        if isinstance(evaluation, Outcome):
            labelled = [{"topic": t.topic, "answered": t.answered, "on_topic": t.on_topic} for t in labels]
            return Outcome(
                evaluation.score,
                issues=evaluation.issues,
                details={**evaluation.details, "labels": labelled, "mode": self.params.mode},
            )
        return evaluation


_NO_RUN = Run(trace_id="", run_id="")
