"""Generated cases for the differential tests and the scorer benchmark (project venv only).

One case family per peer scorer, drawn by hypothesis with a fixed seed (``derandomize=True``,
``database=None``), so CI sees the same cases on every run. A case is plain JSON, the input of the
peer scripts (``tests/peers/<peer>/score.*``) and, through :func:`our_inputs`, of our scorers::

    {"turns": [turn, ...], "mastra": {...}?}

    turn (tool-call families) = {
        "user": str | null,                    # user message text (null = no user message)
        "steps": [[call, ...], ...],           # the actual calls, grouped by the LLM step that emitted them
        "final": str | null,                   # final assistant text (null = no final message)
        "expected": [ecall, ...],              # the reference calls (flat)
        "ref_messages": [msg, ...] | null,     # agentevals reference in message form
    }
    call  = {"name": str, "args": {..}, "result": JSON, "type": "FUNCTION" | "MCP"}
    ecall = {"name": str, "args"?: {..}, "output"?: JSON, "type"?: "FUNCTION" | "MCP"}   (missing = unspecified)
    msg   = {"role": "system" | "user" | "assistant" | "tool", "tool_calls": [ecall, ...] | null}

    turn (ROUGE family) = {"response": str, "reference": str}

:data:`CONFIGS` lists every scorer configuration SCORING.md §2 reproduces, each with our scorer's
kind and parameters and the peer's own parameters.
"""

from __future__ import annotations

import contextlib
import json
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from monitor.scoring.base import Scorer, ScorerConfigError
from monitor.scoring.catalogue import build
from monitor.scoring.expectation import Expectation, ExpectedCall, ExpectedMessage
from monitor.scoring.result import ScoreResult
from monitor.trajectory.model import ABSENT, Run
from tests.scoring.builders import run_with_steps

__all__ = [
    "CONFIGS",
    "FAMILIES",
    "Config",
    "cases_for",
    "draw",
    "our_inputs",
    "our_scorer",
    "score_ours",
]

# --------------------------------------------------------------------------- values and calls

NAMES = ["search", "fetch", "book", "Search"]
KEYS = ["q", "n", "city", "opts", "a", "b.c", "ü"]

_SPECIAL_SCALARS: list[Any] = [
    0,
    1,
    5,
    75,
    -0.0,
    0.5,
    1.0,
    5.0,
    1e16,
    2**53 + 1,
    True,
    False,
    None,
    "5",
    "5.0",
    "75",
    "1",
    "True",
    "true",
    "None",
    "null",
    "",
    " ",
    "Paris",
    "paris",
    "Ｐａｒｉｓ",
    "Zürich",
    unicodedata.normalize("NFD", "Zürich"),
    "東京",
    "สวัสดี",
    "🙂",
    "a\u0000b",
]

SCALARS = st.one_of(
    st.sampled_from(_SPECIAL_SCALARS),
    st.sampled_from(_SPECIAL_SCALARS),
    st.integers(-3, 3),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=4),
    st.booleans(),
    st.none(),
)
NESTED = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(st.sampled_from(KEYS), children, max_size=3),
    ),
    max_leaves=6,
)
VALUES = st.one_of(SCALARS, SCALARS, SCALARS, NESTED)  # mostly scalars: where the peers' equalities differ
ARGS = st.one_of(
    st.dictionaries(st.sampled_from(KEYS), VALUES, min_size=1, max_size=4),
    st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=1),
)


def _variants(value: Any) -> list[Any]:
    """Values that are equal, ``str``-equal or hash-equal to ``value`` in some peer, and some that are not."""
    out: list[Any] = [value]
    if isinstance(value, bool):
        out += [int(value), str(value), float(value)]
    elif isinstance(value, int):
        out += [float(value), str(value), value + 1]
        if value in (0, 1):
            out.append(bool(value))
    elif isinstance(value, float):
        out += [str(value), -value]
        if value.is_integer() and abs(value) < 2**53:
            out += [int(value), str(int(value))]
    elif value is None:
        out += ["None", "null", 0, {}]
    elif isinstance(value, str):
        with contextlib.suppress(ValueError):
            out += [json.loads(value)] * 3  # "5" → 5, "true" → True: str-equal in Ragas only sometimes
        out += [value.upper(), unicodedata.normalize("NFD", value), unicodedata.normalize("NFKC", value), value + " "]
        out += [{"True": True, "False": False, "None": None}.get(value, value.lower())]
    elif isinstance(value, dict):
        out += [dict(reversed(list(value.items()))), {**value, "x": 1}, {k: v for k, v in list(value.items())[1:]}]
    elif isinstance(value, list):
        out += [list(reversed(value)), [*value, None], value[1:]]
    return out


@st.composite
def _mutated_args(draw: st.DrawFn, args: dict[str, Any]) -> dict[str, Any]:
    """``args`` with 0-2 edits: a value replaced by a variant (most often), a key added or removed, keys reordered."""
    out = dict(args)
    for _ in range(draw(st.sampled_from([0, 1, 1, 1, 2]))):
        op = draw(st.sampled_from(["value", "value", "value", "add", "remove", "reorder"]))
        if op == "value" and out:
            key = draw(st.sampled_from(sorted(out)))
            out[key] = draw(st.sampled_from(_variants(out[key])[1:]))
        elif op == "add":
            out[draw(st.sampled_from(KEYS))] = draw(VALUES)
        elif op == "remove" and out:
            del out[draw(st.sampled_from(sorted(out)))]
        elif op == "reorder":
            out = dict(reversed(list(out.items())))
    return out


@st.composite
def call_lists(draw: st.DrawFn, max_calls: int = 5) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(actual, expected) flat call lists: independent, the actual derived from the expected by mutations, or
    the expected calls with perturbed arguments."""
    expected = draw(st.lists(st.fixed_dictionaries({"name": st.sampled_from(NAMES), "args": ARGS}), max_size=max_calls))
    if expected and draw(st.integers(0, 3)) == 0:  # a repeated expected call (DeepEval's "used by value" quirk)
        expected.insert(draw(st.integers(0, len(expected))), dict(draw(st.sampled_from(expected))))
    mode = draw(st.sampled_from(["independent", "mutated", "mutated", "args_only", "args_only"]))
    if mode == "independent":
        actual = draw(
            st.lists(st.fixed_dictionaries({"name": st.sampled_from(NAMES), "args": ARGS}), max_size=max_calls)
        )
    elif mode == "args_only":  # same names in the same order, arguments perturbed: partial credit
        actual = [{"name": c["name"], "args": draw(_mutated_args(c["args"]))} for c in expected]
    else:
        actual = []
        for call in expected:
            op = draw(st.sampled_from(["keep", "keep", "keep", "args", "drop", "dup", "rename"]))
            if op == "drop":
                continue
            name = draw(st.sampled_from(NAMES)) if op == "rename" else call["name"]
            args = draw(_mutated_args(call["args"])) if op == "args" else dict(call["args"])
            actual.append({"name": name, "args": args})
            if op == "dup":
                actual.append({"name": name, "args": dict(args)})
        if draw(st.booleans()) and len(actual) > 1:
            i = draw(st.integers(0, len(actual) - 2))
            actual[i], actual[i + 1] = actual[i + 1], actual[i]
        if draw(st.integers(0, 3)) == 0:
            pos = draw(st.integers(0, len(actual)))
            actual.insert(pos, {"name": draw(st.sampled_from(NAMES)), "args": draw(ARGS)})
    return actual, expected


@st.composite
def _groups(draw: st.DrawFn, calls: list[Any], allow_empty: bool = True) -> list[list[Any]]:
    """``calls`` cut into LLM steps: mostly one call per step, sometimes parallel calls, rarely a step without calls."""
    groups: list[list[Any]] = []
    i = 0
    while i < len(calls):
        if allow_empty and draw(st.integers(0, 9)) == 0:
            groups.append([])
        size = draw(st.sampled_from([1, 1, 1, 2, 3]))
        groups.append(calls[i : i + size])
        i += size
    return groups


def _sizes(groups: Sequence[Sequence[Any]]) -> list[int]:
    return [len(g) for g in groups if g]


def _cut(calls: list[Any], sizes: list[int]) -> list[list[Any]]:
    """``calls`` cut into groups of ``sizes`` (the last group takes what is left; missing calls → shorter)."""
    out: list[list[Any]] = []
    pos = 0
    for k, size in enumerate(sizes):
        end = len(calls) if k == len(sizes) - 1 else pos + size
        out.append(calls[pos:end])
        pos = end
    if not sizes and calls:
        out.append(calls)
    return out


def _messages(groups: list[list[Any]], *, system: int, user: bool, final: bool, tools: int = 0) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "system", "tool_calls": None}] * system
    if user:
        msgs.append({"role": "user", "tool_calls": None})
    for g in groups:
        msgs.append({"role": "assistant", "tool_calls": list(g) if g else None})
        msgs.extend({"role": "tool", "tool_calls": None} for _ in range(max(len(g) + tools, 0)))
    if final:
        msgs.append({"role": "assistant", "tool_calls": None})
    return msgs


# --------------------------------------------------------------------------- families


@st.composite
def agentevals_cases(draw: st.DrawFn) -> dict[str, Any]:
    actual, expected = draw(call_lists())
    steps = draw(_groups(actual))
    final = draw(st.sampled_from(["done", "done", "done", None]))
    # Reference messages: the expected calls grouped like the actual steps (so structure can match) or freely,
    # with optional leading system message, user message, final answer and a perturbed tool-message count.
    ref_groups = _cut(expected, _sizes(steps)) if draw(st.booleans()) else draw(_groups(expected, allow_empty=False))
    ref_messages = _messages(
        ref_groups,
        system=draw(st.sampled_from([0, 0, 0, 1])),
        user=draw(st.sampled_from([True, True, True, False])),
        final=final is not None if draw(st.integers(0, 5)) else final is None,
        tools=draw(st.sampled_from([0, 0, 0, 0, 0, 0, -1, 1])),
    )
    return {
        "turns": [{"user": "hi", "steps": steps, "final": final, "expected": expected, "ref_messages": ref_messages}]
    }


def flat_ref_messages(turn: dict[str, Any]) -> list[dict[str, Any]]:
    """agentevals' reference for a flat expected list: cut into the actual steps' group sizes (§2.3)."""
    sizes = _sizes(turn["steps"])
    cut = iter(_cut(turn["expected"], sizes))
    groups = [next(cut, []) if g else [] for g in turn["steps"]]
    groups.extend(cut)  # reference calls left over when the actual made no call at all
    return _messages(groups, system=0, user=True, final=turn["final"] is not None)


@st.composite
def _tool_turn(draw: st.DrawFn, *, unspecified_args: bool, types: bool, max_calls: int = 5) -> dict[str, Any]:
    actual, expected = draw(call_lists(max_calls=max_calls))
    seen: dict[str, Any] = {}
    for call in actual:
        key = json.dumps([call["name"], call["args"]], sort_keys=True)
        if key in seen and draw(st.integers(0, 3)):  # a repeated call, usually with the same result
            call["result"] = seen[key]
        else:
            call["result"] = draw(st.one_of(st.just("ok"), st.sampled_from([None, "ok", 1, {"t": 21}]), VALUES))
        seen.setdefault(key, call["result"])
        if types:
            call["type"] = draw(st.sampled_from(["FUNCTION", "FUNCTION", "FUNCTION", "MCP"]))
    for call in expected:
        if unspecified_args and draw(st.integers(0, 5)) == 0:
            del call["args"]
        if types:
            if draw(st.integers(0, 3)) == 0:
                call["type"] = "MCP"
            pick = draw(st.integers(0, 3))
            match = next((a for a in actual if a["name"] == call["name"]), None)
            if pick == 1 and match is not None:
                call["output"] = match["result"]
            elif pick == 2:
                call["output"] = draw(st.sampled_from([None, "ok", 1, {"t": 21}]))
    return {
        "user": draw(st.sampled_from(["hi", "hi", "hi", None])),
        "steps": draw(_groups(actual)),
        "final": draw(st.sampled_from(["done", "done", "done", "", None])),
        "expected": expected,
        "ref_messages": None,
    }


@st.composite
def adk_trajectory_cases(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.sampled_from([1, 1, 1, 2, 3]))
    return {"turns": [draw(_tool_turn(unspecified_args=True, types=False, max_calls=4)) for _ in range(n)]}


@st.composite
def ragas_cases(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.sampled_from([1, 1, 1, 2]))
    return {"turns": [draw(_tool_turn(unspecified_args=True, types=False)) for _ in range(n)]}


@st.composite
def deepeval_cases(draw: st.DrawFn) -> dict[str, Any]:
    return {"turns": [draw(_tool_turn(unspecified_args=False, types=True))]}


@st.composite
def mastra_cases(draw: st.DrawFn) -> dict[str, Any]:
    turn = draw(_tool_turn(unspecified_args=True, types=False))
    names = [c["name"] for g in turn["steps"] for c in g]
    opts: dict[str, Any] = {}
    which = draw(st.sampled_from(["tool", "tool", "order", "order", "both", "neither"]))
    if which in ("tool", "both"):
        pool = [*NAMES, "", *names]
        opts["expectedTool"] = draw(st.sampled_from(pool))
    if which in ("order", "both"):
        if names and draw(st.booleans()):
            order = [n for n in names if draw(st.booleans())]  # a subsequence of the calls (often passes)
        else:
            order = draw(st.lists(st.sampled_from(NAMES), max_size=3))
        opts["expectedToolOrder"] = order
    if draw(st.booleans()):
        opts["strictMode"] = draw(st.booleans())
    return {"turns": [turn], "mastra": opts}


_WORDS = [
    "The",
    "the",
    "device_2",
    "status",
    "is",
    "now",
    "OFF",
    "off.",
    "I",
    "have",
    "set",
    "to",
    "running",
    "runs",
    "ran",
    "runner",
    "Temperature:",
    "21°C",
    "weather",
    "Weather's",
    "cats",
    "cat",
    "generously",
    "a",
    "an",
    "Zürich",
    "Zu\u0308rich",  # NFD
    "Straße",
    "STRASSE",
    "ＡＢＣ",
    "abc",
    "café",
    "naïve",
    "4",
    "7",
    "100",
    "3.14",
    "我從骰子擲出了",
    "我擲出了",
    "東京",
    "ひらがな",
    "カタカナ",
    "한국어",
    "สวัสดีครับ",
    "ราคา100บาท",
    "ทำ",
    "ສະບາຍດີ",
    "សួស្តី",
    "မင်္ဂလာပါ",
    "Привет",
    "مرحبا",
    "नमस्ते",
    "🙂",
    "—",
    "e.g.",
    "U.S.A",
    "x²",
    "½",
    "ﬁne",
]
_SEPARATORS = [" ", " ", " ", "", ", ", "\n", ". ", "\t", "-"]


@st.composite
def _text(draw: st.DrawFn) -> str:
    if draw(st.integers(0, 4)) == 0:
        return draw(st.text(max_size=12))
    words = draw(st.lists(st.sampled_from(_WORDS), max_size=10))
    out = ""
    for w in words:
        out += w + draw(st.sampled_from(_SEPARATORS))
    return out


@st.composite
def rouge_cases(draw: st.DrawFn) -> dict[str, Any]:
    turns = []
    for _ in range(draw(st.sampled_from([1, 1, 1, 2]))):
        reference = draw(_text())
        if draw(st.booleans()):
            response = draw(_text())
        else:  # a variant of the reference: some words dropped, repeated or replaced
            parts = reference.split(" ")
            kept = [p for p in parts if draw(st.integers(0, 3))]
            if kept and draw(st.booleans()):
                kept.append(draw(st.sampled_from(kept)))
            response = " ".join(kept) + draw(st.sampled_from(["", " ok", " " + draw(st.sampled_from(_WORDS))]))
        turns.append({"response": response, "reference": reference})
    return {"turns": turns}


FAMILIES: dict[str, Callable[[], st.SearchStrategy[dict[str, Any]]]] = {
    "agentevals": agentevals_cases,
    "adk_trajectory": adk_trajectory_cases,
    "adk_rouge": rouge_cases,
    "ragas": ragas_cases,
    "mastra": mastra_cases,
    "deepeval": deepeval_cases,
}


def draw(strategy: st.SearchStrategy[Any], n: int) -> list[Any]:
    """``n`` examples of ``strategy``, the same ones on every run (fixed seed, no example database)."""
    out: list[Any] = []

    @settings(
        max_examples=n,
        derandomize=True,
        database=None,
        phases=[Phase.generate],
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(example: Any) -> None:
        out.append(example)

    collect()
    return out


@cache
def _cases_json(family: str, n: int) -> str:
    return json.dumps(draw(FAMILIES[family](), n))


def cases_for(family: str, n: int) -> list[dict[str, Any]]:
    """The family's cases as decoded JSON (exactly what the peer scripts receive)."""
    return json.loads(_cases_json(family, n))  # type: ignore[no-any-return]


# --------------------------------------------------------------------------- configurations


@dataclass(frozen=True)
class Config:
    """One scorer configuration: our kind and parameters, the peer's parameters, the case family."""

    id: str
    peer: str
    family: str
    kind: str
    params: dict[str, Any] = field(default_factory=dict)
    peer_params: dict[str, Any] = field(default_factory=dict)
    reference: str = "calls"  # agentevals strict: "messages" (ref_messages) or "calls" (flat, cut by steps)
    tolerance: float = 0.0


def _agentevals_configs() -> list[Config]:
    out = []
    for tmode in ["strict", "unordered", "subset", "superset"]:
        for amode in ["exact", "ignore", "subset", "superset"]:
            p = {"trajectory_match_mode": tmode, "tool_args_match_mode": amode}
            out.append(
                Config(
                    f"agentevals/{tmode}/{amode}",
                    "agentevals",
                    "agentevals",
                    "trajectory_match",
                    p,
                    p,
                    reference="messages" if tmode == "strict" else "calls",
                )
            )
    overrides = {"search": "ignore", "fetch": ["q", "b.c", "opts.a"], "book": "superset", "Search": []}
    for tmode in ["strict", "superset", "subset", "unordered"]:
        p = {"trajectory_match_mode": tmode, "tool_args_match_mode": "exact", "tool_args_match_overrides": overrides}
        ref = "messages" if tmode == "strict" else "calls"
        out.append(
            Config(f"agentevals/{tmode}/exact+overrides", "agentevals", "agentevals", "trajectory_match", p, p, ref)
        )
    p = {"trajectory_match_mode": "strict", "tool_args_match_mode": "exact"}
    out.append(Config("agentevals/strict/exact/flat-reference", "agentevals", "agentevals", "trajectory_match", p, p))
    return out


def _adk_configs() -> list[Config]:
    out = []
    for mt in ["EXACT", "IN_ORDER", "ANY_ORDER"]:
        for ignore in [False, True]:
            ours = {"match_type": mt, "ignore_args": ignore}
            peer = {"metric": "tool_trajectory_avg_score", "match_type": mt, "ignore_args": ignore}
            suffix = "+ignore_args" if ignore else ""
            out.append(
                Config(f"adk/trajectory/{mt}{suffix}", "adk", "adk_trajectory", "adk_tool_trajectory", ours, peer)
            )
    out.append(
        Config(
            "adk/response_match_score",
            "adk",
            "adk_rouge",
            "adk_response_match",
            {"tokenizer": "adk"},
            {"metric": "response_match_score"},
        )
    )
    return out


def _ragas_configs() -> list[Config]:
    out = []
    for api in ["legacy", "collections"]:
        for strict in [True, False]:
            out.append(
                Config(
                    f"ragas/{api}/tool_call_accuracy/strict_order={strict}",
                    "ragas",
                    "ragas",
                    "ragas_tool_call_accuracy",
                    {"strict_order": strict},
                    {"metric": "tool_call_accuracy", "strict_order": strict, "api": api},
                )
            )
        out.append(
            Config(
                f"ragas/{api}/tool_call_f1",
                "ragas",
                "ragas",
                "ragas_tool_call_f1",
                {},
                {"metric": "tool_call_f1", "api": api},
            )
        )
    return out


def _deepeval_configs() -> list[Config]:
    out = []
    for ep in [[], ["input_parameters"], ["output"], ["input_parameters", "output"]]:
        for mode in ["default", "ordering", "exact"]:
            for strict in [False, True]:
                p: dict[str, Any] = {
                    "evaluation_params": ep,
                    "should_exact_match": mode == "exact",
                    "should_consider_ordering": mode == "ordering",
                    "strict_mode": strict,
                }
                name = "+".join(ep) or "names"
                cid = f"deepeval/{name}/{mode}" + ("/strict_mode" if strict else "")
                out.append(Config(cid, "deepeval", "deepeval", "deepeval_tool_correctness", p, p, tolerance=1e-12))
    return out


CONFIGS: list[Config] = [
    *_agentevals_configs(),
    *_adk_configs(),
    *_ragas_configs(),
    Config("mastra/createToolCallAccuracyScorerCode", "mastra", "mastra", "mastra_tool_call_accuracy"),
    *_deepeval_configs(),
]

# --------------------------------------------------------------------------- our side


def _expected_call(c: dict[str, Any]) -> ExpectedCall:
    return ExpectedCall(
        name=c["name"],
        args=c.get("args", ABSENT),
        output=c.get("output", ABSENT),
        type=c.get("type"),
    )


def _run(turn: dict[str, Any], t: int) -> Run:
    steps = [[(c["name"], c["args"]) for c in g] for g in turn["steps"]]
    calls = [c for g in turn["steps"] for c in g]
    return run_with_steps(
        steps,
        final_response=turn["final"],
        user_text=turn["user"],
        results=[c.get("result") for c in calls],
        kinds=["mcp" if c.get("type") == "MCP" else "function" for c in calls],
        trace_id=f"{t:032x}",
        start_ns=t * 10**12,
    )


def our_inputs(config: Config, case: dict[str, Any]) -> tuple[list[Run], list[Expectation]]:
    """Our Runs (one per turn) and Expectations for a case."""
    runs: list[Run] = []
    refs: list[Expectation] = []
    for t, turn in enumerate(case["turns"]):
        if config.family == "adk_rouge":
            runs.append(run_with_steps([], final_response=turn["response"], trace_id=f"{t:032x}"))
            refs.append(Expectation(expected_response=turn["reference"]))
            continue
        runs.append(_run(turn, t))
        messages = None
        if config.reference == "messages":
            messages = tuple(
                ExpectedMessage(
                    role=m["role"],
                    tool_calls=tuple(_expected_call(c) for c in m["tool_calls"]) if m["tool_calls"] else None,
                )
                for m in turn["ref_messages"]
            )
        refs.append(
            Expectation(expected_calls=tuple(_expected_call(c) for c in turn["expected"]), expected_messages=messages)
        )
    return runs, refs


def peer_case(config: Config, case: dict[str, Any]) -> dict[str, Any]:
    """The case as the peer script gets it (agentevals' flat reference is cut into message form here)."""
    if config.peer == "agentevals" and config.reference == "calls":
        return {**case, "turns": [{**t, "ref_messages": flat_ref_messages(t)} for t in case["turns"]]}
    return case


def our_scorer(config: Config, case: dict[str, Any]) -> Scorer[Any]:
    """Our scorer for a case (Mastra's expectations are per-case parameters); may raise ScorerConfigError."""
    params = dict(config.params)
    if config.peer == "mastra":
        opts = case["mastra"]
        params = {
            "expected_tool": opts.get("expectedTool"),
            "strict_mode": opts.get("strictMode", False),
            "expected_tool_order": opts.get("expectedToolOrder"),
        }
    return build(config.kind, params)


def score_ours(scorer: Scorer[Any], runs: list[Run], refs: list[Expectation]) -> ScoreResult:
    if len(runs) == 1:
        return scorer.score(runs[0], refs[0])
    return scorer.score_case(runs, refs)


def ours(config: Config, case: dict[str, Any]) -> float | str:
    """Our number for a case, or ``"not_applicable/<reason>"``, ``"error/<reason>"``, ``"config_error"``."""
    try:
        scorer = our_scorer(config, case)
    except ScorerConfigError:
        return "config_error"
    runs, refs = our_inputs(config, case)
    result = score_ours(scorer, runs, refs)
    if result.status != "scored":
        return f"{result.status}/{result.reason}"
    assert result.score is not None
    return result.score
