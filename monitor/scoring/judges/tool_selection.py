"""``judge_tool_selection``: tool selection appropriateness, Mastra ``createToolCallAccuracyScorerLLM``
(SCORING.md §4.1).

Sends the user's request, the final response, the called tool names in view order (duplicates kept, or
``None``) and the S2 tool catalogue. The verdict judges each call and lists missed tools. Score
(``variant: mastra``): no evaluations → 0 with missing tools else 1; otherwise ``round2(appropriate /
evaluations)`` with Mastra's half-up rounding (missing tools do not lower a non-empty score).
``variant: penalize_missing`` (ours): ``appropriate / (evaluations + missing)``. Issues: inappropriate
calls and missing tools through §2.0 steps 3–4 (:func:`monitor.scoring.explain.explain`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from monitor.scoring.base import Evaluation, Need, NotScored, Outcome, Threshold
from monitor.scoring.base import ViewParams as _ViewParams
from monitor.scoring.expectation import Expectation, ExpectedCall
from monitor.scoring.explain import explain
from monitor.scoring.judges.base import Judge, JudgeParams, Prepared, tools_for
from monitor.scoring.judges.protocol import Block, JudgeConfig, round_half_up_2, truncate
from monitor.scoring.judges.render import final_response_block, names_block
from monitor.trajectory.model import Run
from monitor.trajectory.view import view

__all__ = ["TOOL_SELECTION_SCHEMA", "ToolSelectionJudge", "ToolSelectionParams"]


class ToolSelectionParams(JudgeParams, _ViewParams):
    variant: Literal["mastra", "penalize_missing"] = "mastra"
    threshold: Threshold = 0.5


TOOL_SELECTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["evaluations", "missing_tools", "reason"],
    "additionalProperties": False,
    "properties": {
        "evaluations": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["call_index", "tool", "appropriate", "reasoning"],
                "additionalProperties": False,
                "properties": {
                    "call_index": {"type": "integer", "minimum": 0},
                    "tool": {"type": "string"},
                    "appropriate": {"type": "boolean"},
                    "reasoning": {"type": "string"},
                },
            },
        },
        "missing_tools": {"type": "array", "items": {"type": "string"}},
        "clarification_requested": {"type": "boolean"},
        "reason": {"type": "string"},
    },
}

INSTRUCTIONS = """You are an expert evaluator of how an AI agent selects tools.

You receive the user's request in <user_input>, the agent's final answer in <final_response>, the tools the \
agent called in <called_tools> (one line per call, "[call_index] tool_name", in call order; "None" when it \
called none) and the tools it could call in <tools>.

Judge each called tool against the user's explicit request:
- A call is appropriate when the tool directly addresses what the user asked for, or is needed to answer it.
- A tool that is helpful but was not requested is NOT appropriate. Judge what the user asked, not what might \
be nice to do.
- Evaluate every line of <called_tools> separately, with its call_index, duplicates included.

Then list in missing_tools the tools of <tools> that should have been called to fulfil the request and were not.

When the agent called no tool:
- If the request is vague or ambiguous and the agent asked a clarifying question, that is appropriate: set \
clarification_requested to true and list no missing tools.
- If the request is specific and the agent gave a generic answer instead of calling the tool that would answer \
it, list that tool in missing_tools.

Example: the user asks "What's the weather in Paris?"; the agent calls get_weather and get_news. get_weather is \
appropriate; get_news is not (helpful but not requested); missing_tools is empty.

Submit your verdict with the submit_verdict tool: evaluations (one per called tool), missing_tools, \
clarification_requested when it applies, and reason (one or two sentences summarising the verdict)."""


class ToolSelectionJudge(Judge[ToolSelectionParams]):
    """Were the called tools appropriate for the request, and which were missed? (LLM judge)"""

    kind: ClassVar[str] = "judge_tool_selection"
    major: ClassVar[int] = 1
    Params = ToolSelectionParams
    needs = frozenset({Need.USER_INPUT})
    turn_mode = "mean"
    summary = "Were the called tools appropriate for the request, and which were missed? (LLM judge)"
    instructions: ClassVar[str] = INSTRUCTIONS
    uses_catalogue: ClassVar[bool] = True

    @classmethod
    def prompt_material(cls) -> list[Any]:
        return [cls.instructions, TOOL_SELECTION_SCHEMA]

    def variant(self) -> str | None:
        return None if self.params.variant == "mastra" else self.params.variant

    def prepare(self, runs: Sequence[Run], reference: Expectation | None, config: JudgeConfig) -> Prepared | NotScored:
        run = runs[-1]
        if not run.user_text:
            return NotScored.na("no_user_input")
        calls = view(run, self.params.calls_source, self.params.scope)
        limit = config.max_field_chars
        blocks = [
            Block.text("user_input", truncate(run.user_text, limit)),
            final_response_block(run, limit),
            names_block(calls),
        ]
        return self.request(
            config, blocks, TOOL_SELECTION_SCHEMA, tools=tools_for(run, reference), context={"calls": calls}
        )

    def decide(self, verdicts: Sequence[dict[str, Any]], prepared: Prepared) -> Evaluation:
        verdict = verdicts[0]
        evaluations: list[dict[str, Any]] = list(verdict["evaluations"])
        missing: list[str] = list(verdict["missing_tools"])
        appropriate = sum(1 for e in evaluations if e["appropriate"])
        if self.params.variant == "penalize_missing":
            total = len(evaluations) + len(missing)
            score = appropriate / total if total else 1.0
        elif not evaluations:
            score = 0.0 if missing else 1.0
        else:
            score = round_half_up_2(appropriate / len(evaluations))
        calls = prepared.context["calls"]
        by_index = {c.index: c for c in calls}
        wrong = []
        for e in evaluations:
            call = by_index.get(e["call_index"])
            if not e["appropriate"] and call is not None and call not in wrong:
                wrong.append(call)
        issues = explain(wrong, [ExpectedCall(name) for name in missing]).issues
        return Outcome(
            score,
            issues=issues,
            details={
                "appropriate": appropriate,
                "evaluations": len(evaluations),
                "missing_tools": missing,
                "clarification_requested": verdict.get("clarification_requested"),
                "verdict": verdict,
            },
        )
