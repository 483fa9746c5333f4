"""``judge_trajectory_quality``: agentevals trajectory judge / ADK rubric judges (SCORING.md §4.5).

``style: agentevals`` (default): agentevals' ``TRAJECTORY_ACCURACY_PROMPT`` rubric (logical steps, clear
progression, relatively efficient), plus "semantically equivalent to the reference" when the expectation
has ``expected_calls`` (``…_WITH_REFERENCE``). Verdict ``{reasoning, score}``: boolean → 1.0/0.0 (default,
threshold 1.0), a number in [0, 1] with ``continuous: true``, or one of ``choices`` (threshold 0.8).

``style: rubric`` (ADK ``rubric_based_tool_use_quality_v1``): rubrics ``[{id, text, kind}]`` from the
parameters, else the expectation's ``rubrics``, else five defaults. Verdict ``{rubrics: [{id, verdict,
rationale}], reason}``; "yes" = fulfilled or not applicable. ``num_samples: n`` runs the judge n times and
takes each rubric's majority verdict, ties → "no" (ADK ``MajorityVotePerInvocationResultsAggregator``).
Score = mean over rubrics with a verdict (none → ``error/judge_output_invalid``); each "no" → an issue of
the rubric's ``kind`` (default ``poor_trajectory``). Threshold 0.8.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

import pydantic

from monitor.scoring.base import Evaluation, NotScored, Outcome, Threshold, ViewParams, canonical_json
from monitor.scoring.expectation import Expectation
from monitor.scoring.judges.base import Judge, JudgeParams, Prepared, tools_for
from monitor.scoring.judges.protocol import Block, JudgeConfig
from monitor.scoring.judges.render import final_response_block, reference_block, trajectory_block, user_input_block
from monitor.scoring.result import FailureKind, Issue
from monitor.trajectory.model import Run
from monitor.trajectory.view import view

__all__ = [
    "DEFAULT_RUBRICS",
    "Rubric",
    "TrajectoryQualityJudge",
    "TrajectoryQualityParams",
    "agentevals_schema",
    "majority",
]


class Rubric(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    id: str = pydantic.Field(min_length=1)
    text: str = pydantic.Field(min_length=1)
    kind: FailureKind = FailureKind.POOR_TRAJECTORY


DEFAULT_RUBRICS: tuple[Rubric, ...] = (
    Rubric(
        id="needed_tools_called",
        text="The agent called every tool needed to fulfil the request.",
        kind=FailureKind.MISSING_TOOL,
    ),
    Rubric(
        id="arguments_correct",
        text="Every tool call's arguments are correct for the request.",
        kind=FailureKind.WRONG_VALUE,
    ),
    Rubric(
        id="no_unnecessary_calls",
        text="The agent made no unnecessary tool calls.",
        kind=FailureKind.UNNECESSARY_TOOL,
    ),
    Rubric(
        id="results_used_correctly",
        text="The agent used the tool results correctly in its next steps and final answer.",
    ),
    Rubric(
        id="errors_handled",
        text="The agent handled tool errors appropriately (retried sensibly, or reported them).",
    ),
)


class TrajectoryQualityParams(JudgeParams, ViewParams):
    style: Literal["agentevals", "rubric"] = "agentevals"
    continuous: bool = False
    choices: tuple[float, ...] | None = None
    rubrics: tuple[Rubric, ...] | None = None
    num_samples: int = pydantic.Field(1, ge=1, le=15)
    threshold: Threshold | None = None
    """None: 1.0 for the boolean agentevals verdict, else 0.8."""

    @pydantic.field_validator("choices")
    @classmethod
    def _fractions(cls, value: tuple[float, ...] | None) -> tuple[float, ...] | None:
        if value is not None and (not value or any(not 0.0 <= v <= 1.0 for v in value)):
            raise ValueError("choices must be a non-empty list of scores in [0, 1]")
        return value


def agentevals_schema(continuous: bool, choices: Sequence[float] | None) -> dict[str, Any]:
    """agentevals' ``{reasoning, score}`` with the score typed by the parameters."""
    score: dict[str, Any]
    if choices:
        score = {"enum": list(choices)}
    elif continuous:
        score = {"type": "number", "minimum": 0, "maximum": 1}
    else:
        score = {"type": "boolean"}
    return {
        "type": "object",
        "required": ["reasoning", "score"],
        "additionalProperties": False,
        "properties": {"reasoning": {"type": "string"}, "score": score},
    }


RUBRIC_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["rubrics", "reason"],
    "additionalProperties": False,
    "properties": {
        "rubrics": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["id", "verdict", "rationale"],
                "additionalProperties": False,
                "properties": {
                    "id": {"type": "string"},
                    "verdict": {"enum": ["yes", "no"]},
                    "rationale": {"type": "string"},
                },
            },
        },
        "reason": {"type": "string"},
    },
}

_AGENTEVALS_RUBRIC = """An accurate trajectory:
- Makes logical sense between steps
- Shows clear progression
- Is relatively efficient, though it does not need to be perfectly efficient"""

AGENTEVALS_INSTRUCTIONS = f"""You are an expert data labeler. Your task is to grade the accuracy of an AI agent's \
internal trajectory.

<Rubric>
{_AGENTEVALS_RUBRIC}
</Rubric>

First, try to understand the goal of the trajectory by looking at the input in <user_input> (if the input is \
not present, try to infer it from the content of the first message) and at the final output in \
<final_response>. Once you understand the goal, grade the trajectory in <trajectory> (one line per tool call: \
"[index] tool arguments -> result", or "-> ERROR type: message" for a failed call) as it relates to achieving \
that goal. The tools the agent could call are listed in <tools>.

Submit your verdict with the submit_verdict tool: reasoning (your reasoning, one or two sentences), then the \
score."""

AGENTEVALS_WITH_REFERENCE_INSTRUCTIONS = f"""You are an expert data labeler. Your task is to grade the accuracy \
of an AI agent's internal trajectory.

<Rubric>
{_AGENTEVALS_RUBRIC}
- Is semantically equivalent to the provided reference trajectory
</Rubric>

Grade the trajectory in <trajectory> (one line per tool call: "[index] tool arguments -> result", or \
"-> ERROR type: message" for a failed call) against the reference trajectory in <reference_trajectory> \
(rendered the same way, without results), for the input in <user_input> and the final output in \
<final_response>. The tools the agent could call are listed in <tools>.

Submit your verdict with the submit_verdict tool: reasoning (your reasoning, one or two sentences), then the \
score."""

_SCORE_SCALES = {
    "boolean": "The score is true if the trajectory is accurate by the rubric, false otherwise.",
    "continuous": "The score is a number between 0 and 1: 1 for a fully accurate trajectory, 0 for a useless one.",
    "choices": "The score is one of the allowed values of the schema: the higher, the more accurate.",
}

RUBRIC_INSTRUCTIONS = """You are an expert evaluator of an AI agent's tool use. You receive the user's request \
in <user_input>, the agent's tool calls in <trajectory> (one line per call: "[index] tool arguments -> result", \
or "-> ERROR type: message" for a failed call), its final answer in <final_response>, the tools it could call in \
<tools> and a list of rubrics in <rubrics> ("id: property").

For EACH rubric, give a verdict: "yes" if the agent's tool use fulfils the property, or if the property does \
not apply to this interaction; "no" if it does not fulfil it. Give a short rationale for each verdict, using \
the rubric's id exactly as given, and an overall reason (one or two sentences).

Submit your verdict with the submit_verdict tool."""


def majority(votes: Sequence[str]) -> str:
    """ADK's per-rubric majority: "yes" only with more yes than no votes (ties → "no")."""
    yes = sum(1 for v in votes if v == "yes")
    return "yes" if yes > len(votes) - yes else "no"


class TrajectoryQualityJudge(Judge[TrajectoryQualityParams]):
    """Is the trajectory sensible and efficient, or does it meet the rubrics? (LLM judge)"""

    kind: ClassVar[str] = "judge_trajectory_quality"
    major: ClassVar[int] = 1
    Params = TrajectoryQualityParams
    needs = frozenset()
    turn_mode = "mean"
    summary = "Is the trajectory sensible and efficient, or does it meet the rubrics? (LLM judge)"
    uses_catalogue: ClassVar[bool] = True

    @classmethod
    def prompt_material(cls) -> list[Any]:
        return [
            AGENTEVALS_INSTRUCTIONS,
            AGENTEVALS_WITH_REFERENCE_INSTRUCTIONS,
            _SCORE_SCALES,
            RUBRIC_INSTRUCTIONS,
            RUBRIC_SCHEMA,
            agentevals_schema(False, None),
            agentevals_schema(True, None),
            [r.model_dump(mode="json") for r in DEFAULT_RUBRICS],
        ]

    def variant(self) -> str | None:
        return None if self.params.style == "agentevals" else self.params.style

    @property
    def threshold(self) -> float | None:
        if self.params.threshold is not None:
            return self.params.threshold
        boolean = self.params.style == "agentevals" and not self.params.continuous and not self.params.choices
        return 1.0 if boolean else 0.8

    def rubrics_for(self, reference: Expectation | None) -> tuple[Rubric, ...]:
        if self.params.rubrics:
            return self.params.rubrics
        if reference is not None and reference.rubrics:
            return tuple(Rubric(id=i, text=t) for i, t in reference.rubrics)
        return DEFAULT_RUBRICS

    def prepare(self, runs: Sequence[Run], reference: Expectation | None, config: JudgeConfig) -> Prepared | Evaluation:
        run = runs[-1]
        calls = view(run, self.params.calls_source, self.params.scope)
        if not calls and not run.final_response:
            return NotScored.na("no_output")
        limit = config.max_field_chars
        blocks = [user_input_block(runs, limit), trajectory_block(calls, limit), final_response_block(run, limit)]
        tools = tools_for(run, reference)
        if self.params.style == "rubric":
            rubrics = self.rubrics_for(reference)
            blocks.append(Block("rubrics", tuple(f"{r.id}: {r.text}" for r in rubrics)))
            return self.request(
                config,
                blocks,
                RUBRIC_SCHEMA,
                system=[RUBRIC_INSTRUCTIONS],
                tools=tools,
                samples=self.params.num_samples,
                context={"rubrics": rubrics},
            )
        expected = reference.expected_calls if reference is not None else None
        if self.params.choices:
            scale = _SCORE_SCALES["choices"]
        else:
            scale = _SCORE_SCALES["continuous" if self.params.continuous else "boolean"]
        if expected is not None:
            blocks.insert(2, reference_block(expected, limit))
            system = f"{AGENTEVALS_WITH_REFERENCE_INSTRUCTIONS}\n{scale}"
        else:
            system = f"{AGENTEVALS_INSTRUCTIONS}\n{scale}"
        schema = agentevals_schema(self.params.continuous, self.params.choices)
        return self.request(
            config,
            blocks,
            schema,
            system=[system],
            tools=tools,
            samples=self.params.num_samples,
            context={"reference": expected is not None},
        )

    def reason_of(self, verdicts: Sequence[dict[str, Any]]) -> str | None:
        if self.params.style == "agentevals":
            return str(verdicts[0].get("reasoning") or "") or None
        return super().reason_of(verdicts)

    def decide(self, verdicts: Sequence[dict[str, Any]], prepared: Prepared) -> Evaluation:
        if self.params.style == "rubric":
            return self._decide_rubrics(verdicts, prepared.context["rubrics"])
        scores = [_agentevals_score(v["score"]) for v in verdicts]
        score = sum(scores) / len(scores)
        issues: tuple[Issue, ...] = ()
        threshold = self.threshold
        if threshold is not None and score < threshold:
            issues = (Issue(FailureKind.POOR_TRAJECTORY, detail=verdicts[0].get("reasoning")),)
        return Outcome(
            score,
            issues=issues,
            details={"with_reference": prepared.context["reference"], "sample_scores": scores},
        )

    def _decide_rubrics(self, verdicts: Sequence[dict[str, Any]], rubrics: Sequence[Rubric]) -> Evaluation:
        known = {r.id: r for r in rubrics}
        votes: dict[str, list[str]] = {r.id: [] for r in rubrics}
        rationale: dict[str, str] = {}
        for verdict in verdicts:
            seen: set[str] = set()
            for item in verdict["rubrics"]:
                rid = item["id"]
                if rid not in known or rid in seen:
                    continue
                seen.add(rid)
                votes[rid].append(item["verdict"])
                if item["verdict"] == "no" or rid not in rationale:
                    rationale.setdefault(rid, item["rationale"])
        decided = {rid: majority(v) for rid, v in votes.items() if v}
        if not decided:
            return NotScored.err("judge_output_invalid", problem="no verdict for a given rubric")
        score = sum(1 for v in decided.values() if v == "yes") / len(decided)
        issues = tuple(
            Issue(known[rid].kind, detail={"rubric": rid, "text": known[rid].text, "rationale": rationale.get(rid)})
            for rid in known
            if decided.get(rid) == "no"
        )
        return Outcome(
            score,
            issues=issues,
            details={
                "rubric_verdicts": decided,
                "votes": {k: v for k, v in votes.items() if v},
                "rubric_version": rubric_version(rubrics),
            },
        )


def rubric_version(rubrics: Sequence[Rubric]) -> str:
    """The rubrics' version: the first 12 hex of SHA-256 over their canonical JSON (ids, texts, kinds), so a
    verdict says which rubric text it answered, whether the rubrics came from the parameters or a dataset."""
    material = [{"id": r.id, "text": r.text, "kind": str(r.kind)} for r in rubrics]
    return hashlib.sha256(canonical_json(material).encode("utf-8")).hexdigest()[:12]


def _agentevals_score(value: Any) -> float:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    return float(value)
