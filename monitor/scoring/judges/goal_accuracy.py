"""``judge_goal_accuracy``: Ragas ``AgentGoalAccuracyWithReference`` / ``WithoutReference`` (SCORING.md §4.3).

Sends the workflow in Ragas' ``pretty_repr`` format (``scope: run``: this turn; ``conversation``: every turn
given) and, with a reference, the ``reference_outcome``. Ragas makes two calls (infer goal and end state, then
compare); this judge makes one whose verdict carries the fields in that order: ``user_goal``, ``end_state``,
``desired_outcome``, ``reason``, ``verdict`` (0 | 1). With a reference, ``desired_outcome`` must repeat it
(checked: a mismatch is a repair retry). Score = ``verdict``; threshold 1.0; 0 → ``goal_not_met``.

``two_step: true`` makes Ragas' two calls instead: the first infers ``user_goal`` and ``end_state`` from the
workflow (Ragas' ``InferGoalOutcomePrompt``); the second compares the desired outcome (the reference, else the
inferred goal) with that end state and gives ``reason`` and ``verdict`` (Ragas' ``CompareOutcomePrompt``). The
two verdicts merge into the one-call verdict, so scoring and issues are the same.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from monitor.scoring.base import Evaluation, Need, NotScored, Outcome, Threshold
from monitor.scoring.expectation import Expectation
from monitor.scoring.judges.base import Judge, JudgeParams, Prepared
from monitor.scoring.judges.protocol import Block, JudgeConfig, truncate
from monitor.scoring.judges.render import pretty_repr
from monitor.scoring.result import FailureKind, Issue
from monitor.trajectory.model import Run
from monitor.trajectory.view import view

__all__ = ["GOAL_ACCURACY_SCHEMA", "GoalAccuracyJudge", "GoalAccuracyParams"]


class GoalAccuracyParams(JudgeParams):
    scope: Literal["run", "conversation"] = "run"
    threshold: Threshold = 1.0
    two_step: bool = False


GOAL_ACCURACY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["user_goal", "end_state", "desired_outcome", "reason", "verdict"],
    "additionalProperties": False,
    "properties": {
        "user_goal": {"type": "string"},
        "end_state": {"type": "string"},
        "desired_outcome": {"type": "string"},
        "reason": {"type": "string"},
        "verdict": {"enum": [0, 1]},
    },
}

_COMMON = """You are an expert evaluator of whether an AI agent achieved its user's goal.

You receive the interaction in <workflow>, in this format: "Human: …" lines are the user's messages, "AI: …" \
lines the agent's messages, "Tools:" lists the tools the agent called ("  name: arguments"), "ToolOutput: …" \
what each tool returned.

Work in this order:
1. user_goal: infer the goal the user wanted to achieve in this interaction, in one sentence.
2. end_state: describe the end state the interaction reached (what was actually done or answered)."""

INSTRUCTIONS_WITHOUT_REFERENCE = (
    _COMMON
    + """
3. desired_outcome: repeat user_goal.
4. reason: one or two sentences comparing the desired outcome with the end state.
5. verdict: 1 if the end state achieves the desired outcome, 0 otherwise.

Submit your verdict with the submit_verdict tool."""
)

INSTRUCTIONS_WITH_REFERENCE = (
    _COMMON
    + """
3. desired_outcome: copy the text of <reference_outcome> exactly, character for character.
4. reason: one or two sentences comparing the desired outcome with the end state.
5. verdict: 1 if the end state achieves the desired outcome, 0 otherwise.

Submit your verdict with the submit_verdict tool."""
)


INFER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["user_goal", "end_state"],
    "additionalProperties": False,
    "properties": {"user_goal": {"type": "string"}, "end_state": {"type": "string"}},
}

COMPARE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["reason", "verdict"],
    "additionalProperties": False,
    "properties": {"reason": {"type": "string"}, "verdict": {"enum": [0, 1]}},
}

INSTRUCTIONS_INFER = (
    _COMMON
    + """

Submit user_goal and end_state with the submit_verdict tool."""
)

INSTRUCTIONS_COMPARE = """You are an expert evaluator of whether an AI agent achieved its user's goal.

You receive the outcome the user wanted in <desired_outcome> and the end state the interaction reached in \
<end_state>. Decide whether the end state achieves the desired outcome.

Submit with the submit_verdict tool: reason (one or two sentences comparing the two) and verdict (1 if the end \
state achieves the desired outcome, 0 otherwise)."""


def _norm(text: str) -> str:
    return " ".join(text.split())


class GoalAccuracyJudge(Judge[GoalAccuracyParams]):
    """Was the user's goal (or the reference outcome) achieved? (LLM judge)"""

    kind: ClassVar[str] = "judge_goal_accuracy"
    major: ClassVar[int] = 1
    Params = GoalAccuracyParams
    needs = frozenset({Need.USER_INPUT})
    turn_mode = "mean"
    summary = "Was the user's goal (or the reference outcome) achieved? (LLM judge)"

    @classmethod
    def prompt_material(cls) -> list[Any]:
        return [
            INSTRUCTIONS_WITHOUT_REFERENCE,
            INSTRUCTIONS_WITH_REFERENCE,
            GOAL_ACCURACY_SCHEMA,
            INSTRUCTIONS_INFER,
            INFER_SCHEMA,
            INSTRUCTIONS_COMPARE,
            COMPARE_SCHEMA,
        ]

    def variant(self) -> str | None:
        return None if self.params.scope == "run" else self.params.scope

    def prepare(self, runs: Sequence[Run], reference: Expectation | None, config: JudgeConfig) -> Prepared | Evaluation:
        run = runs[-1]
        turns = runs if self.params.scope == "conversation" else [run]
        if not run.user_text:
            return NotScored.na("no_user_input")
        if not run.final_response and not view(run, "auto", "flatten"):
            return NotScored.na("no_output")
        limit = config.max_field_chars
        outcome = reference.reference_outcome if reference is not None else None
        blocks = [Block("workflow", pretty_repr(turns, limit), elidable=True)]
        if self.params.two_step:
            return self._two_step(config, blocks, truncate(outcome, limit) if outcome else None)
        if outcome:
            blocks.append(Block.text("reference_outcome", truncate(outcome, limit)))
            expected = truncate(outcome, limit)

            def check(verdict: dict[str, Any]) -> str | None:
                if _norm(str(verdict.get("desired_outcome", ""))) != _norm(expected):
                    return "desired_outcome must be the exact text of <reference_outcome>"
                return None

            return self.request(
                config,
                blocks,
                GOAL_ACCURACY_SCHEMA,
                system=[INSTRUCTIONS_WITH_REFERENCE],
                check=check,
                context={"reference": True},
            )
        return self.request(
            config, blocks, GOAL_ACCURACY_SCHEMA, system=[INSTRUCTIONS_WITHOUT_REFERENCE], context={"reference": False}
        )

    def _two_step(self, config: JudgeConfig, blocks: list[Block], outcome: str | None) -> Prepared:
        """Ragas' two calls: infer, then compare; the second request is built from the first verdict."""
        limit = config.max_field_chars

        def compare(inferred: dict[str, Any]) -> Prepared:
            desired = outcome if outcome is not None else str(inferred["user_goal"])
            second = [
                Block.text("desired_outcome", truncate(desired, limit)),
                Block.text("end_state", truncate(str(inferred["end_state"]), limit)),
            ]
            prepared = self.request(config, second, COMPARE_SCHEMA, system=[INSTRUCTIONS_COMPARE])
            return dataclasses.replace(prepared, combine=lambda a, b: {**a, "desired_outcome": desired, **b})

        first = self.request(
            config, blocks, INFER_SCHEMA, system=[INSTRUCTIONS_INFER], context={"reference": outcome is not None}
        )
        return dataclasses.replace(first, follow_up=compare)

    def decide(self, verdicts: Sequence[dict[str, Any]], prepared: Prepared) -> Evaluation:
        verdict = verdicts[0]
        score = float(verdict["verdict"])
        issues: tuple[Issue, ...] = ()
        if verdict["verdict"] == 0:
            issues = (
                Issue(
                    FailureKind.GOAL_NOT_MET,
                    expected=verdict["desired_outcome"],
                    actual=verdict["end_state"],
                    detail=verdict["reason"],
                ),
            )
        return Outcome(
            score,
            issues=issues,
            details={
                "with_reference": prepared.context["reference"],
                "user_goal": verdict["user_goal"],
                "end_state": verdict["end_state"],
                "desired_outcome": verdict["desired_outcome"],
            },
        )
