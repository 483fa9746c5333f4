"""``judge_argument_correctness``: DeepEval ``ArgumentCorrectnessMetric`` (SCORING.md §4.2).

Sends the user's request, the S2 tool catalogue and, for each call with captured arguments, its index, name,
canonical arguments and the assistant text that preceded it in its step (DeepEval's ``reasoning``). Calls
with ABSENT arguments are not rendered (none left → ``not_applicable/arguments_not_captured``); no calls →
``not_applicable/no_tool_calls`` unless ``empty_score`` (DeepEval: 1.0).

Verdicts are keyed by ``call_index``: unknown or duplicate indices are dropped; score = yes / kept
(DeepEval ``score_qag_verdicts``); none kept → ``error/judge_output_invalid``; ``strict_mode``: a score
below the threshold is 0. Each "no" → ``wrong_value`` (``parameter`` as a JSON Pointer when given).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from monitor.scoring.base import Evaluation, Need, NotScored, Outcome, Threshold, ViewParams
from monitor.scoring.expectation import Expectation
from monitor.scoring.explain import pointer
from monitor.scoring.judges.base import Judge, JudgeParams, Prepared, tools_for
from monitor.scoring.judges.protocol import Block, JudgeConfig, render_call, truncate
from monitor.scoring.judges.render import step_text
from monitor.scoring.result import FailureKind, call_issue
from monitor.trajectory.model import ABSENT, Run, ToolCall
from monitor.trajectory.view import view

__all__ = ["ARGUMENT_CORRECTNESS_SCHEMA", "ArgumentCorrectnessJudge", "ArgumentCorrectnessParams"]


class ArgumentCorrectnessParams(JudgeParams, ViewParams):
    strict_mode: bool = False
    empty_score: Threshold | None = None
    threshold: Threshold | None = None
    """None: 0.5, or 1.0 with ``strict_mode`` (DeepEval)."""


ARGUMENT_CORRECTNESS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["verdicts", "reason"],
    "additionalProperties": False,
    "properties": {
        "verdicts": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["call_index", "verdict", "parameter", "reason"],
                "additionalProperties": False,
                "properties": {
                    "call_index": {"type": "integer"},
                    "verdict": {"enum": ["yes", "no"]},
                    "parameter": {"type": ["string", "null"]},
                    "reason": {"type": ["string", "null"]},
                },
            },
        },
        "reason": {"type": "string"},
    },
}

INSTRUCTIONS = """You are an expert evaluator of the arguments an AI agent passes to its tools.

You receive the user's request in <user_input>, the tools the agent could call in <tools> (description and \
input schema) and the agent's tool calls in <tool_calls>: one entry per call, "[call_index] tool_name \
arguments", followed by the agent's own text written just before the call ("reasoning"), when there was any.

For EACH call, decide whether its input parameters relevantly and correctly address the user input:
- "yes" when the arguments are the right ones to serve the user's request (values taken from or correctly \
derived from the request, the right format for the tool's schema);
- "no" when an argument is wrong, irrelevant, invented, or does not follow from the request. Then name the \
offending parameter in "parameter" (its top-level name; null if the problem is not one parameter) and give a \
short reason.
- A call without parameters is "no" when its tool requires parameters; it is "yes" when the tool's schema has \
no required parameters and the call addresses the request.

Give exactly one verdict per call, with the call_index shown in <tool_calls>; reason may be null for "yes".

Example: the user asks "Weather in Paris in Fahrenheit"; call [0] get_weather {"city":"Paris","units":"celsius"} \
→ {"call_index":0,"verdict":"no","parameter":"units","reason":"The user asked for Fahrenheit."}.

Submit your verdict with the submit_verdict tool: verdicts, and reason (one or two sentences on the overall \
argument quality)."""


class ArgumentCorrectnessJudge(Judge[ArgumentCorrectnessParams]):
    """Do each call's arguments correctly address the user input? (LLM judge)"""

    kind: ClassVar[str] = "judge_argument_correctness"
    major: ClassVar[int] = 1
    Params = ArgumentCorrectnessParams
    needs = frozenset({Need.USER_INPUT, Need.ARGUMENTS})
    turn_mode = "mean"
    summary = "Do each call's arguments correctly address the user input? (LLM judge)"
    instructions: ClassVar[str] = INSTRUCTIONS
    uses_catalogue: ClassVar[bool] = True

    @classmethod
    def prompt_material(cls) -> list[Any]:
        return [cls.instructions, ARGUMENT_CORRECTNESS_SCHEMA]

    def variant(self) -> str | None:
        return "strict" if self.params.strict_mode else None

    @property
    def threshold(self) -> float | None:
        if self.params.threshold is not None:
            return self.params.threshold
        return 1.0 if self.params.strict_mode else 0.5

    def prepare(self, runs: Sequence[Run], reference: Expectation | None, config: JudgeConfig) -> Prepared | Evaluation:
        run = runs[-1]
        calls = view(run, self.params.calls_source, self.params.scope)
        if not calls:
            if self.params.empty_score is not None:
                return Outcome(self.params.empty_score, details={"calls": 0})
            return NotScored.na("no_tool_calls")
        captured = [c for c in calls if c.args is not ABSENT]
        if not captured:
            return NotScored.na("arguments_not_captured", calls_without_arguments=[c.index for c in calls])
        if not run.user_text:
            return NotScored.na("no_user_input")
        limit = config.max_field_chars
        lines: list[str] = []
        for call in captured:
            lines.append(render_call(call, limit, result=False))
            reasoning = step_text(run, call)
            if reasoning:
                lines.append(f"    reasoning: {truncate(reasoning, limit)}")
        blocks = [
            Block.text("user_input", truncate(run.user_text, limit)),
            Block("tool_calls", tuple(lines), elidable=True),
        ]
        return self.request(
            config, blocks, ARGUMENT_CORRECTNESS_SCHEMA, tools=tools_for(run, reference), context={"calls": captured}
        )

    def decide(self, verdicts: Sequence[dict[str, Any]], prepared: Prepared) -> Evaluation:
        verdict = verdicts[0]
        calls: list[ToolCall] = list(prepared.context["calls"])
        by_index = {c.index: c for c in calls}
        kept: dict[int, dict[str, Any]] = {}
        dropped: list[int] = []
        for v in verdict["verdicts"]:
            i = v["call_index"]
            if i not in by_index or i in kept:
                dropped.append(i)
                continue
            kept[i] = v
        if not kept:
            return NotScored.err("judge_output_invalid", problem="no verdict for a rendered call", dropped=dropped)
        yes = sum(1 for v in kept.values() if v["verdict"] == "yes")
        score = yes / len(kept)
        threshold = self.threshold
        if self.params.strict_mode and threshold is not None and score < threshold:
            score = 0.0
        issues = []
        for i, v in sorted(kept.items()):
            if v["verdict"] != "no":
                continue
            param = v.get("parameter")
            issues.append(
                call_issue(
                    FailureKind.WRONG_VALUE,
                    by_index[i],
                    parameter=(param if param.startswith("/") else pointer(param)) if param else None,
                    detail=v.get("reason"),
                )
            )
        return Outcome(
            score,
            issues=tuple(issues),
            threshold=threshold,
            details={"yes": yes, "verdicts": len(kept), "dropped_indices": dropped, "verdict": verdict},
        )
