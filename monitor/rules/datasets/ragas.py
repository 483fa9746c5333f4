"""Ragas-like multi-turn samples (SCORING.md §6.4), JSON array or JSON Lines.

``{user_input: [Message], reference?, reference_tool_calls?: [{name, args}], reference_topics?,
rubrics?: {id: text}}``; Message = ``{type: human|ai|tool, content, tool_calls?, metadata?}`` (what
Ragas ``EvaluationDataset.to_jsonl`` writes). ``user_input`` is a recorded conversation and becomes
the case's actual trajectory:

* each ``human`` message starts a turn (one Run per turn); a conversation must start with one;
* each ``ai`` message is one model step; its ``tool_calls`` are the step's tool_call parts and calls
  (``selected`` view), in order;
* each ``tool`` message is the result of the oldest call still without one (an orphan tool message
  is an error);
* the turn's final response is the last ``ai`` message without tool calls (None if there is none).

The expectation applies to the whole conversation and sits on the first turn (later turns carry an
empty expectation; ``concatenate`` scorers merge them). Case id = the sample's index.
Default scorers: ``ragas_tool_call_accuracy`` and ``ragas_tool_call_f1`` when some sample has
``reference_tool_calls``; ``judge_goal_accuracy`` (``scope: conversation``, as Ragas reads the whole sample)
always, ``judge_topic_adherence`` when some sample has topics, ``judge_trajectory_quality``
(``style: rubric``) when some has rubrics (judge kinds are ``not_applicable/judges_disabled`` without judges).
All gate with ``aggregate: mean``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from monitor.rules.datasets._common import JsonLines, Where
from monitor.rules.datasets.model import Case, Dataset, Gate, GateSpec, ScorerSpec, Turn
from monitor.scoring.expectation import Expectation, ExpectedCall
from monitor.trajectory.model import (
    ABSENT,
    Captured,
    LlmStep,
    Message,
    Run,
    TextPart,
    ToolCall,
    ToolCallPart,
    ToolResultPart,
)

__all__ = ["conversation_runs", "load_ragas"]

_SAMPLE = ("user_input", "reference", "reference_tool_calls", "reference_topics", "rubrics")
_MESSAGE = ("type", "content", "tool_calls", "metadata")


def _where(path: Path, doc: Any, index: int) -> Where:
    base = Where(str(path))
    if isinstance(doc, JsonLines):
        return Where(str(path), f"$[{index}] (line {doc.lines[index]})")
    return base.item(index)


def _tool_calls(value: Any, where: Where) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for i, raw in enumerate(where.array(value or [])):
        at = where.item(i)
        call = at.fields(raw, ("name", "args"), required=("name",))
        args = call.get("args", {})
        at.key("args").obj(args)
        out.append((at.key("name").string(call["name"]), args))
    return out


def conversation_runs(messages: Any, where: Where, *, trace_id: str) -> tuple[tuple[Run, ...], list[str]]:
    """The recorded runs (one per human turn) of a Ragas conversation, and the turns' user texts."""
    items = where.array(messages, "an array of messages")
    if not items:
        where.fail("user_input is empty: a conversation needs at least one human message")
    turns: list[list[tuple[str, Any, Where]]] = []
    for i, raw in enumerate(items):
        at = where.item(i)
        msg = at.fields(raw, _MESSAGE, required=("type", "content"))
        mtype = msg["type"]
        if mtype not in ("human", "ai", "tool"):
            at.key("type").fail(f"message type must be human, ai or tool, got {mtype!r}")
        content = msg["content"]
        if mtype != "tool" or not isinstance(content, str):
            at.key("content").string(content)
        if mtype == "human":
            turns.append([])
        elif not turns:
            at.fail("the conversation must start with a human message")
        if "tool_calls" in msg and msg["tool_calls"] is not None and mtype != "ai":
            at.key("tool_calls").fail("only ai messages carry tool_calls")
        turns[-1].append((mtype, msg, at))

    runs: list[Run] = []
    texts: list[str] = []
    history: list[Message] = []
    call_no = 0
    for t, turn in enumerate(turns):
        _, human, _ = turn[0]
        text = human["content"]
        texts.append(text)
        history.append(Message("user", (TextPart(text),)))
        turn_input = tuple(history)
        steps: list[LlmStep] = []
        calls: list[ToolCall] = []
        pending: list[int] = []
        results: dict[int, Captured] = {}
        final: str | None = None
        for mtype, msg, at in turn[1:]:
            if mtype == "ai":
                parsed = _tool_calls(msg.get("tool_calls"), at.key("tool_calls"))
                parts: list[ToolCallPart] = []
                for j, (name, args) in enumerate(parsed):
                    call_id = f"call_{call_no}"
                    call_no += 1
                    parts.append(ToolCallPart(name, call_id, args))
                    pending.append(len(calls))
                    calls.append(
                        ToolCall(index=len(calls), name=name, call_id=call_id, args=args, step=len(steps), part=j)
                    )
                steps.append(LlmStep(index=len(steps), tool_calls=tuple(parts), text=msg["content"] or None))
                history.append(Message("assistant", (TextPart(msg["content"]), *parts)))
                if not parsed:
                    final = msg["content"]
            else:
                if not pending:
                    at.fail("a tool message with no pending tool call before it")
                k = pending.pop(0)
                results[k] = msg["content"]
                history.append(Message("tool", (ToolResultPart(calls[k].call_id, msg["content"], calls[k].name),)))
        done = tuple(
            ToolCall(
                index=c.index,
                name=c.name,
                call_id=c.call_id,
                args=c.args,
                result=results.get(c.index, ABSENT),
                step=c.step,
                part=c.part,
                requested_args=c.args,
            )
            for c in calls
        )
        runs.append(
            Run(
                trace_id=trace_id,
                run_id=f"turn-{t}",
                user_input=turn_input,
                final_response=final,
                steps=tuple(steps),
                calls=done,
            )
        )
    return tuple(runs), texts


def load_ragas(path: Path, doc: Any) -> Dataset:
    """A Ragas-like dataset from a decoded JSON array or JSON Lines list of multi-turn samples."""
    root = Where(str(path))
    items = root.array(doc)
    cases: list[Case] = []
    any_calls = any_topics = any_rubrics = False
    for i, raw in enumerate(items):
        at = _where(path, doc, i)
        sample = at.fields(raw, _SAMPLE, required=("user_input",), what="a multi-turn sample object")
        runs, texts = conversation_runs(sample["user_input"], at.key("user_input"), trace_id=f"ragas-{i}")
        expected_calls = None
        if sample.get("reference_tool_calls") is not None:
            parsed = _tool_calls(sample["reference_tool_calls"], at.key("reference_tool_calls"))
            expected_calls = tuple(ExpectedCall(name=n, args=a) for n, a in parsed)
            any_calls = True
        reference = sample.get("reference")
        if reference is not None:
            at.key("reference").string(reference)
        topics = None
        if sample.get("reference_topics") is not None:
            topics = at.key("reference_topics").strings(sample["reference_topics"])
            any_topics = True
        rubrics: tuple[tuple[str, str], ...] = ()
        if sample.get("rubrics") is not None:
            rub = at.key("rubrics").obj(sample["rubrics"])
            rubrics = tuple((str(k), at.key("rubrics").key(str(k)).string(v)) for k, v in rub.items())
            any_rubrics = any_rubrics or bool(rubrics)
        expectation = Expectation(
            expected_calls=expected_calls, reference_outcome=reference, reference_topics=topics, rubrics=rubrics
        )
        turns = tuple(
            Turn(
                input=runs[t].user_input or (Message("user", (TextPart(text),)),),
                expectation=expectation if t == 0 else Expectation(),
            )
            for t, text in enumerate(texts)
        )
        cases.append(Case(id=str(i), source="ragas", turns=turns, actual=runs, file=str(path)))
    specs: list[ScorerSpec] = []
    if any_calls:
        specs.append(ScorerSpec("ragas_tool_call_accuracy", "ragas_tool_call_accuracy", {}))
        specs.append(ScorerSpec("ragas_tool_call_f1", "ragas_tool_call_f1", {}))
    # Ragas judges the whole conversation (its MultiTurnSample), not the last turn
    specs.append(ScorerSpec("judge_goal_accuracy", "judge_goal_accuracy", {"scope": "conversation"}))
    if any_topics:
        specs.append(ScorerSpec("judge_topic_adherence", "judge_topic_adherence", {}))
    if any_rubrics:
        specs.append(ScorerSpec("judge_trajectory_quality", "judge_trajectory_quality", {"style": "rubric"}))
    name = path.name.removesuffix(".jsonl").removesuffix(".json")
    return Dataset(
        name=name,
        source="ragas",
        file=str(path),
        cases=tuple(cases),
        scorers=tuple(specs),
        gate=Gate(min_pass_rate=1.0, runs=1, scorers={s.id: GateSpec(aggregate="mean") for s in specs}),
    )
