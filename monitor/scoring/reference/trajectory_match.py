"""``trajectory_match``: agentevals ``create_trajectory_match_evaluator`` (SCORING.md §2.3).

Peer: agentevals 0.0.9, ``agentevals/trajectory/match.py``, ``strict.py``, ``unordered.py``,
``subset.py``, ``superset.py``, ``utils.py`` (``_is_trajectory_superset``,
``_get_matcher_for_tool_name``, ``_get_partial_matcher_on_keys``).

Reproduced quirks: the greedy first-fit superset test; the **swapped operands** of ``subset``
(the matcher receives reference args first); a falsy override (``[]``, ``""``) is ignored;
``unordered`` is two independent greedy superset tests; ``strict`` compares message structure
(roles, which messages carry tool calls, and a greedy any-order match inside each message), never
text. ``matching: optimal`` (ours) replaces each greedy superset test by a maximum bipartite
matching (Hopcroft–Karp).

Decisions where agentevals is silent or would raise:

* arguments that are not JSON objects under ``subset``/``superset`` (agentevals would raise on
  ``.items()``) compare with ``==``; key paths walk only through dicts (anything else → None);
* an unspecified reference ``args`` is ``{}`` (§6.5);
* ``strict`` actual message structure (§2.3): per turn the user message (only when the
  reference has one), then one assistant message per LlmStep of the run (carrying the calls the
  step emitted, in ``part`` order) followed by one tool message per call; calls without a step,
  and calls of nested runs (grouped by their own step), form their own assistant message at their
  place in view order; own steps without calls become assistant messages without calls, placed
  by step index; a final response whose step was not captured adds one assistant message;
* issues (§2.0) are produced only when the match fails; ``superset`` drops ``unnecessary_tool``
  and ``subset`` drops ``missing_tool`` (extra calls / omitted calls are allowed there).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeAlias

import pydantic

from monitor.scoring.base import (
    ArgumentParams,
    Evaluation,
    Need,
    NotScored,
    Outcome,
    Scorer,
    ScorerConfigError,
    ScorerParams,
    Threshold,
    merge_expectations,
)
from monitor.scoring.expectation import Expectation, ExpectedCall, ExpectedMessage
from monitor.scoring.explain import explain, hopcroft_karp
from monitor.scoring.result import FailureKind, frozen_init
from monitor.trajectory.model import ABSENT, Run, ToolCall

__all__ = ["ArgsMatchMode", "TrajectoryMatch", "TrajectoryMatchParams", "args_matcher_for"]

ArgsMatchMode: TypeAlias = Literal["exact", "ignore", "subset", "superset"]
ArgsMatcherFn: TypeAlias = Callable[[Any, Any], bool]
Override: TypeAlias = ArgsMatchMode | list[str]


class TrajectoryMatchParams(ArgumentParams):
    trajectory_match_mode: Literal["strict", "unordered", "subset", "superset"] = "strict"
    tool_args_match_mode: ArgsMatchMode = "exact"
    tool_args_match_overrides: dict[str, Override] = pydantic.Field(default_factory=dict)
    matching: Literal["greedy", "optimal"] = "greedy"
    threshold: Threshold = 1.0


# --------------------------------------------------------------------------- argument matchers


def _exact(x: Any, y: Any) -> bool:
    return bool(x == y)


def _subset(x: Any, y: Any) -> bool:
    """Every key of ``x`` is in ``y`` with an equal value (agentevals ``_subset_match``)."""
    if not isinstance(x, dict) or not isinstance(y, dict):
        return bool(x == y)
    return all(k in y and y[k] == v for k, v in x.items())


def _superset(x: Any, y: Any) -> bool:
    """Every key of ``y`` is in ``x`` with an equal value (agentevals ``_superset_match``)."""
    return _subset(y, x)


def _ignore(x: Any, y: Any) -> bool:
    return True


def _ignore_any(name: str) -> ArgsMatcherFn:
    return _ignore


_MODES: dict[str, ArgsMatcherFn] = {"exact": _exact, "subset": _subset, "superset": _superset, "ignore": _ignore}


def _nested(d: Any, path: str) -> Any:
    current = d
    for part in path.split("."):
        if not isinstance(current, dict):
            return None
        current = current.get(part)
        if current is None:
            return None
    return current


def _key_matcher(keys: Sequence[str]) -> ArgsMatcherFn:
    def match(x: Any, y: Any) -> bool:
        return all(_nested(x, k) == _nested(y, k) for k in keys)

    return match


def args_matcher_for(
    name: str,
    mode: ArgsMatchMode,
    overrides: Mapping[str, Override | ArgsMatcherFn],
) -> ArgsMatcherFn:
    """The argument matcher of a tool: a truthy override for ``name``, else the mode."""
    override = overrides.get(name)
    if not override:
        return _MODES[mode]
    if isinstance(override, str):
        return _MODES[override]
    if isinstance(override, list | tuple):
        return _key_matcher(list(override))
    return override


# --------------------------------------------------------------------------- superset test


@frozen_init
@dataclass(frozen=True, slots=True)
class _Call:
    name: str
    args: Any


def _superset_of(
    p: Sequence[_Call], q: Sequence[_Call], matcher: Callable[[str], ArgsMatcherFn], optimal: bool
) -> bool:
    """agentevals ``_is_trajectory_superset(P, Q)``: every call of Q takes a distinct call of P."""
    if optimal:
        adjacency = [
            [j for j, pc in enumerate(p) if pc.name == qc.name and matcher(qc.name)(pc.args, qc.args)] for qc in q
        ]
        return len(hopcroft_karp(adjacency, len(p))) == len(q)
    used: set[int] = set()
    for qc in q:
        m = matcher(qc.name)
        for j, pc in enumerate(p):
            if j in used or pc.name != qc.name:
                continue
            if m(pc.args, qc.args):
                used.add(j)
                break
        else:
            return False
    return True


# --------------------------------------------------------------------------- strict structure


@frozen_init
@dataclass(frozen=True, slots=True)
class _Msg:
    role: str
    calls: tuple[_Call, ...] | None = None


_ROLES = {"human": "user", "ai": "assistant"}


def _norm_role(role: str) -> str:
    return _ROLES.get(role, role)


def _reference_messages(messages: Sequence[ExpectedMessage]) -> list[_Msg]:
    out = [
        _Msg(_norm_role(m.role), tuple(_Call(c.name, _ref_args(c)) for c in m.tool_calls) if m.tool_calls else None)
        for m in messages
    ]
    while out and out[0].role == "system":
        out.pop(0)
    return out


def _ref_args(call: ExpectedCall) -> Any:
    return {} if call.args is ABSENT else call.args


def _call_groups(calls: Sequence[ToolCall]) -> list[tuple[int | None, list[ToolCall]]]:
    """Calls grouped by emitting step, in view order; the int is the own (depth 0) step index."""
    groups: list[tuple[int | None, list[ToolCall]]] = []
    keys: list[object] = []
    for c in calls:
        key: object = (c.depth, c.agent, c.step) if c.step is not None else object()
        if keys and keys[-1] == key:
            groups[-1][1].append(c)
            continue
        if key in keys:  # a step's parallel calls interleaved with another group: join the first one
            groups[keys.index(key)][1].append(c)
            continue
        keys.append(key)
        groups.append((c.step if c.depth == 0 and c.step is not None else None, [c]))
    return groups


def _actual_messages(run: Run, calls: Sequence[ToolCall], with_user: bool) -> list[_Msg]:
    groups = _call_groups(calls)
    out: list[_Msg] = [_Msg("user")] if with_user else []
    call_steps = {s for s, _ in groups if s is not None}
    body: list[list[_Msg]] = []
    positions: list[int | None] = []
    for step, group in groups:
        ordered = sorted(group, key=lambda c: (c.part if c.part is not None else -1, c.index))
        body.append([_Msg("assistant", tuple(_Call(c.name, c.args) for c in ordered))] + [_Msg("tool")] * len(group))
        positions.append(step)
    for st in run.steps:
        if st.index in call_steps:
            continue
        insert_at = next((k for k, s in enumerate(positions) if s is not None and s > st.index), len(body))
        body.insert(insert_at, [_Msg("assistant")])
        positions.insert(insert_at, st.index)
    for chunk in body:
        out.extend(chunk)
    if run.final_response is not None and not (out and out[-1].role == "assistant" and out[-1].calls is None):
        out.append(_Msg("assistant"))
    return out


def _group_match(actual: Sequence[_Call], reference: Sequence[_Call], matcher: Callable[[str], ArgsMatcherFn]) -> bool:
    """agentevals ``strict``: same count, each actual call takes the first unused reference call."""
    if len(actual) != len(reference):
        return False
    seen = [False] * len(reference)
    for a in actual:
        m = matcher(a.name)
        for i, r in enumerate(reference):
            if not seen[i] and a.name == r.name and m(a.args, r.args):
                seen[i] = True
                break
        else:
            return False
    return True


def _strict_messages(
    actual: Sequence[_Msg], reference: Sequence[_Msg], matcher: Callable[[str], ArgsMatcherFn]
) -> bool:
    if len(actual) != len(reference):
        return False
    for a, r in zip(actual, reference, strict=True):
        if a.role != r.role:
            return False
        if (a.calls is not None) != (r.calls is not None):
            return False
        if a.calls is not None and r.calls is not None and not _group_match(a.calls, r.calls, matcher):
            return False
    return True


# --------------------------------------------------------------------------- the scorer


class TrajectoryMatch(Scorer[TrajectoryMatchParams]):
    """agentevals trajectory match (strict / unordered / subset / superset), boolean → 1.0 / 0.0."""

    kind: ClassVar[str] = "trajectory_match"
    version: ClassVar[int] = 1
    Params = TrajectoryMatchParams
    needs = frozenset({Need.REFERENCE, Need.ARGUMENTS})
    turn_mode = "concatenate"
    summary = "agentevals create_trajectory_match_evaluator: 4 trajectory × 4 args modes (§2.3)"

    def __init__(
        self,
        params: Mapping[str, Any] | ScorerParams | None = None,
        *,
        id: str | None = None,
        matchers: Mapping[str, ArgsMatcherFn] | None = None,
    ) -> None:
        """``matchers``: Python-API callable overrides ``(actual_args, reference_args) -> bool`` per tool.

        They take precedence over ``tool_args_match_overrides`` and are part of the identity
        (their qualified names are added to the effective parameters).
        """
        super().__init__(params, id=id)
        self.matchers: dict[str, ArgsMatcherFn] = dict(matchers or {})
        for name, fn in self.matchers.items():
            if not callable(fn):
                raise ScorerConfigError(self.kind, [f"matcher for tool {name!r} is not callable"])
        if self.matchers:
            from monitor.scoring.base import params_hash

            self.params_json["callable_overrides"] = {
                n: getattr(f, "__qualname__", repr(f)) for n, f in sorted(self.matchers.items())
            }
            self.params_hash = params_hash(self.params_json)
        self._overrides: dict[str, Override | ArgsMatcherFn] = dict(self.params.tool_args_match_overrides)
        self._overrides.update(self.matchers)
        self._by_name: dict[str, ArgsMatcherFn] = {}

    def variant(self) -> str | None:
        mode = self.params.trajectory_match_mode
        return None if mode == "strict" else mode

    def _matcher_for(self, name: str) -> ArgsMatcherFn:
        """The argument matcher of a tool (callable ``matchers`` first, then the overrides, then the mode),
        looked up once per tool name (the table stops growing at 4,096 names)."""
        found = self._by_name.get(name)
        if found is None:
            found = args_matcher_for(name, self.params.tool_args_match_mode, self._overrides)
            if len(self._by_name) < 4096:
                self._by_name[name] = found
        return found

    def _matcher(self, args_off: bool) -> Callable[[str], ArgsMatcherFn]:
        return _ignore_any if args_off else self._matcher_for

    def _compares_args(self, name: str) -> bool:
        return self._matcher_for(name) is not _ignore

    def evaluate(self, run: Run, reference: Expectation | None) -> Evaluation:
        return self._evaluate([run], reference)

    def evaluate_conversation(self, runs: Sequence[Run], references: Sequence[Expectation | None]) -> Evaluation:
        return self._evaluate(list(runs), merge_expectations(references))

    def _evaluate(self, runs: Sequence[Run], reference: Expectation | None) -> Evaluation:
        if reference is None or (reference.expected_calls is None and reference.expected_messages is None):
            return NotScored.na("no_reference")
        per_turn = [self.calls(r) for r in runs]
        calls = [c for turn in per_turn for c in turn]
        if reference.expected_messages is not None:
            ref_calls = [c for m in reference.expected_messages for c in (m.tool_calls or ())]
        else:
            ref_calls = list(reference.expected_calls or ())

        gate = self.arguments_gate([c for c in calls if self._compares_args(c.name)])
        if isinstance(gate, NotScored):
            return gate
        args_off = gate == "names_only"
        matcher = self._matcher(args_off)
        optimal = self.params.matching == "optimal"
        actual = [_Call(c.name, c.args) for c in calls]
        expected = [_Call(c.name, _ref_args(c)) for c in ref_calls]
        mode = self.params.trajectory_match_mode

        if mode == "superset":
            ok = _superset_of(actual, expected, matcher, optimal)
        elif mode == "subset":
            ok = _superset_of(expected, actual, matcher, optimal)
        elif mode == "unordered":
            ok = _superset_of(actual, expected, matcher, optimal) and _superset_of(expected, actual, matcher, optimal)
        else:
            ok = self._strict(runs, per_turn, reference, matcher)

        issues = () if ok else self._issues(calls, ref_calls, matcher, args_off)
        return Outcome(
            1.0 if ok else 0.0,
            issues=issues,
            details={"trajectory_match_mode": mode, "actual_calls": len(calls), "reference_calls": len(ref_calls)},
            degraded="names_only" if args_off else None,
        )

    def _strict(
        self,
        runs: Sequence[Run],
        per_turn: Sequence[Sequence[ToolCall]],
        reference: Expectation,
        matcher: Callable[[str], ArgsMatcherFn],
    ) -> bool:
        if reference.expected_messages is not None:
            ref_msgs = _reference_messages(reference.expected_messages)
            with_user = any(m.role == "user" for m in ref_msgs)
            act_msgs = [
                m for run, calls in zip(runs, per_turn, strict=True) for m in _actual_messages(run, calls, with_user)
            ]
            return _strict_messages(act_msgs, ref_msgs, matcher)
        # flat reference: cut it into the actual steps' group sizes
        groups = [g for calls in per_turn for _, g in _call_groups(calls)]
        ref = [_Call(c.name, _ref_args(c)) for c in reference.expected_calls or ()]
        if sum(len(g) for g in groups) != len(ref):
            return False
        pos = 0
        for g in groups:
            ordered = sorted(g, key=lambda c: (c.part if c.part is not None else -1, c.index))
            chunk = ref[pos : pos + len(g)]
            pos += len(g)
            if not _group_match([_Call(c.name, c.args) for c in ordered], chunk, matcher):
                return False
        return True

    def _issues(
        self,
        calls: Sequence[ToolCall],
        ref_calls: Sequence[ExpectedCall],
        matcher: Callable[[str], ArgsMatcherFn],
        args_off: bool,
    ) -> tuple[Any, ...]:
        mode = self.params.trajectory_match_mode

        def m(a: ToolCall, e: ExpectedCall) -> bool:
            fn = matcher(a.name)
            return fn(_ref_args(e), a.args) if mode == "subset" else fn(a.args, _ref_args(e))

        exp = explain(
            calls,
            ref_calls,
            None if args_off else m,
            exact_args=self.params.tool_args_match_mode == "exact" and not args_off,
            order_failed=mode == "strict",
        )
        drop = {"superset": FailureKind.UNNECESSARY_TOOL, "subset": FailureKind.MISSING_TOOL}.get(mode)
        return tuple(i for i in exp.issues if i.kind != drop)
