"""The scorer contract shared by every code scorer (SCORING.md §0, §1.4, §1.5, §5.1).

A scorer is a small object built from validated parameters. It is a pure function of
``(run(s), expectation, parameters)``: no I/O, no clock (``scored_at`` is filled by the caller).

Writing a scorer::

    class MyParams(ArgumentParams):          # or ScorerParams / ViewParams
        threshold: Threshold = 1.0
        mode: Literal["a", "b"] = "a"

    class MyScorer(Scorer[MyParams]):
        kind = "my_scorer"
        version = 1
        Params = MyParams
        needs = frozenset({Need.REFERENCE, Need.ARGUMENTS})
        turn_mode = "mean"                  # or "concatenate"

        def evaluate(self, run: Run, reference: Expectation | None) -> Evaluation:
            ...
            return Outcome(score=1.0, issues=...)     # or NotScored.na("no_reference")

The base class supplies:

* parameter validation (:class:`ScorerConfigError` names the parameter and the fix),
  the effective parameters as JSON (``params_json``) and their ``params_hash`` (first 12 hex of
  SHA-256 of the RFC 8785 canonical JSON);
* the instance id (``scorer`` field of §5.1: the configured id, else ``kind`` or
  ``kind:variant``);
* :meth:`Scorer.score` and :meth:`Scorer.score_turns`, which never raise: any exception inside
  a scorer becomes ``status=error, reason=internal`` with the exception type and message in
  ``details`` (the caller logs and counts it);
* the result builders (:meth:`Scorer.scored`, :meth:`Scorer.not_applicable`, :meth:`Scorer.error`),
  each of which builds the final :class:`ScoreResult` in one construction (scorer identity, the
  run's identity, ``scored_at`` when given: the scoring stage never copies a result to complete it),
  and the §1.4 ``on_missing_arguments`` gate (:meth:`Scorer.arguments_gate`).

Scorers compute their number first and build issues (:func:`~monitor.scoring.explain.explain`)
only when one must be written: the result failed, or SCORING.md asks for the issue regardless
(budget warnings, ``tool_eval``'s name issues).

§0 conventions live here too: :func:`json_equal` (Python ``==`` on decoded JSON),
:func:`canonical_json` (RFC 8785), :func:`hashable` (hash-based set membership with Python
semantics), :func:`passes` (``score >= threshold``).
"""

from __future__ import annotations

import abc
import dataclasses
import difflib
import enum
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Generic, Literal, TypeAlias, TypeVar, cast

import pydantic
import rfc8785

from monitor.scoring.expectation import Expectation, ExpectedCall
from monitor.scoring.result import (
    ERROR_REASONS,
    NOT_APPLICABLE_REASONS,
    Issue,
    ScoreResult,
    Status,
    frozen_init,
)
from monitor.trajectory.model import ABSENT, Malformed, Run, ToolCall
from monitor.trajectory.view import CallsSource, Scope, view

__all__ = [
    "ArgumentParams",
    "Evaluation",
    "Need",
    "NotScored",
    "OnMissingArguments",
    "Outcome",
    "Scorer",
    "ScorerConfigError",
    "ScorerParams",
    "Threshold",
    "TurnMode",
    "ViewParams",
    "canonical_json",
    "conversation_calls",
    "hashable",
    "json_equal",
    "merge_expectations",
    "params_hash",
    "passes",
]


# --------------------------------------------------------------------------- §0 conventions


def json_equal(a: Any, b: Any) -> bool:
    """Value equality of §0: Python ``==`` on decoded JSON values.

    Dict equality ignores key order, lists are ordered, ``1 == 1.0``, ``5 != "5"``, ``True == 1``.
    ``ABSENT`` equals only ``ABSENT``; a :class:`Malformed` equals only the same raw text.
    """
    return bool(a == b)


def canonical_json(value: Any) -> str:
    """RFC 8785 (JCS) canonical JSON text of a JSON value (raises ``TypeError``/``ValueError`` otherwise)."""
    return bytes(rfc8785.dumps(value)).decode("utf-8")


def params_hash(params: Mapping[str, Any]) -> str:
    """First 12 hex digits of SHA-256 of the canonical JSON of the effective parameters (§0)."""
    return hashlib.sha256(rfc8785.dumps(dict(params))).hexdigest()[:12]


def hashable(value: Any) -> Any:
    """A hashable stand-in for a decoded JSON value with Python's equality and hash.

    Dicts become frozensets of ``(key, hashable(value))``, lists and tuples become tuples, sets
    frozensets; scalars stay as they are, so ``hashable(1) == hashable(1.0) == hashable(True)``
    (Ragas' ``_make_hashable``; DeepEval's de-duplication). ``ABSENT`` and :class:`Malformed` are
    hashable already.
    """
    if isinstance(value, Mapping):
        return frozenset((k, hashable(v)) for k, v in value.items())
    if isinstance(value, list | tuple):
        return tuple(hashable(v) for v in value)
    if isinstance(value, set | frozenset):
        return frozenset(hashable(v) for v in value)
    return value


def passes(score: float, threshold: float | None) -> bool | None:
    """``score >= threshold`` (every peer uses ``>=``); ``None`` for informational scorers."""
    if threshold is None:
        return None
    return score >= threshold


# --------------------------------------------------------------------------- parameters


class ScorerConfigError(ValueError):
    """A scorer's parameters are invalid. The message names the scorer, the parameter and the fix."""

    def __init__(self, kind: str, problems: Sequence[str]) -> None:
        self.kind = kind
        self.problems = tuple(problems)
        joined = "; ".join(self.problems)
        super().__init__(f"scorer {kind!r}: {joined}")


Threshold = Annotated[float, pydantic.Field(ge=0.0, le=1.0, allow_inf_nan=False)]
"""A pass threshold in [0, 1]."""

OnMissingArguments: TypeAlias = Literal["not_applicable", "names_only"]


class ScorerParams(pydantic.BaseModel):
    """Base of every scorer's parameter model: unknown keys are errors, instances are frozen.

    Subclasses declare their fields with defaults; ``threshold`` is redeclared with the scorer's
    default (``None`` = informational scorer, no pass/fail).
    """

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True, strict=False)

    threshold: Threshold | None = None


class ViewParams(ScorerParams):
    """Parameters of scorers that read calls through the §1.3 view (every scorer over calls)."""

    calls_source: CallsSource = "auto"
    scope: Scope = "flatten"


class ArgumentParams(ViewParams):
    """Parameters of scorers that compare arguments (§1.4 ``on_missing_arguments``)."""

    on_missing_arguments: OnMissingArguments = "not_applicable"


# --------------------------------------------------------------------------- outcomes


class Need(enum.StrEnum):
    """What data a scorer needs (used by the catalogue, sampling and docs)."""

    REFERENCE = "reference"
    ARGUMENTS = "arguments"
    RESULTS = "results"
    TOOL_DEFINITIONS = "tool_definitions"
    USER_INPUT = "user_input"
    FINAL_RESPONSE = "final_response"
    TIMINGS = "timings"
    TOPIC_LABELS = "topic_labels"
    RULES = "rules"


TurnMode: TypeAlias = Literal["mean", "concatenate"]
"""§1.5: ``mean`` scores each turn and averages (ADK); ``concatenate`` scores the whole
conversation as one list of calls (Ragas, agentevals)."""


@frozen_init
@dataclass(frozen=True, slots=True)
class Outcome:
    """A scored evaluation, before it is wrapped into a :class:`ScoreResult`.

    ``passed`` None → ``score >= threshold`` (set it only for scorers with their own pass rule,
    e.g. §2.1). ``threshold`` None → the scorer's ``params.threshold``.
    """

    score: float
    passed: bool | None = None
    issues: tuple[Issue, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)
    degraded: str | None = None
    threshold: float | None = None


@frozen_init
@dataclass(frozen=True, slots=True)
class NotScored:
    """A ``not_applicable`` or ``error`` evaluation with its §1.4 reason code."""

    status: Literal["not_applicable", "error"]
    reason: str
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        allowed = NOT_APPLICABLE_REASONS if self.status == "not_applicable" else ERROR_REASONS
        if self.reason not in allowed:
            raise ValueError(f"{self.status} reason {self.reason!r} is not one of {sorted(allowed)}")

    @staticmethod
    def na(reason: str, **details: Any) -> NotScored:
        return NotScored("not_applicable", reason, details)

    @staticmethod
    def err(reason: str, **details: Any) -> NotScored:
        return NotScored("error", reason, details)


Evaluation: TypeAlias = Outcome | NotScored


# --------------------------------------------------------------------------- conversations


def conversation_calls(
    runs: Sequence[Run], calls_source: CallsSource = "auto", scope: Scope = "flatten"
) -> tuple[ToolCall, ...]:
    """The calls of several turns as one list (turn order, then §1.3 order), re-indexed from 0."""
    out: list[ToolCall] = []
    for run in runs:
        for call in view(run, calls_source, scope):
            out.append(dataclasses.replace(call, index=len(out)) if call.index != len(out) else call)
    return tuple(out)


def merge_expectations(references: Sequence[Expectation | None]) -> Expectation | None:
    """One conversation-level expectation from per-turn ones (for ``concatenate`` scorers).

    ``expected_calls`` / ``expected_messages`` / ``expected_tools`` / ``expected_keywords`` / ``reference_topics`` /
    ``topic_labels`` / ``forbidden_tools`` are concatenated over the turns that set them (None when
    no turn does); every other field is taken from the first turn that sets it (``no_tools`` is
    OR-ed). All None → None.
    """
    present = [r for r in references if r is not None]
    if not present:
        return None
    if len(present) == 1:
        return present[0]

    def concat(name: str) -> Any:
        values = [getattr(r, name) for r in present if getattr(r, name) is not None]
        if not values:
            return None
        return tuple(item for v in values for item in v)

    def first(name: str, default: Any = None) -> Any:
        for r in present:
            value = getattr(r, name)
            if value is not None and value != default:
                return value
        return getattr(present[0], name)

    base = present[0]
    return dataclasses.replace(
        base,
        expected_calls=concat("expected_calls"),
        expected_messages=concat("expected_messages"),
        expected_tools=concat("expected_tools"),
        forbidden_tools=concat("forbidden_tools"),
        expected_keywords=concat("expected_keywords"),
        reference_topics=concat("reference_topics"),
        topic_labels=concat("topic_labels"),
        no_tools=any(r.no_tools for r in present),
        expected_response=first("expected_response"),
        category=first("category"),
        reference_outcome=first("reference_outcome"),
        allowed_tools=tuple(dict.fromkeys(t for r in present for t in r.allowed_tools)),
        rubrics=first("rubrics", ()),
    )


# --------------------------------------------------------------------------- the scorer

P = TypeVar("P", bound=ScorerParams)


class Scorer(abc.ABC, Generic[P]):
    """Base class of code scorers. Subclasses set the class attributes and implement :meth:`evaluate`.

    Class attributes:
        kind: registry name (SCORING.md section title, e.g. ``"tool_eval"``).
        version: semantics version; bump on any change of numbers.
        Params: the pydantic parameter model.
        needs: the data the scorer reads.
        turn_mode: §1.5 multi-turn semantics.
        summary: one line for the catalogue (defaults to the first docstring line).
    """

    kind: ClassVar[str]
    version: ClassVar[int]
    Params: ClassVar[type[ScorerParams]]
    needs: ClassVar[frozenset[Need]] = frozenset()
    turn_mode: ClassVar[TurnMode] = "mean"
    summary: ClassVar[str] = ""

    def __init__(self, params: Mapping[str, Any] | ScorerParams | None = None, *, id: str | None = None) -> None:
        self.params: P = cast(P, self.validate_params(params))
        self.params_json: dict[str, Any] = self.params.model_dump(mode="json")
        self.params_hash: str = params_hash(self.params_json)
        self.id: str = id if id is not None else self.default_id()
        # the view of :meth:`calls`, read once (parameters are frozen)
        self._calls_source: CallsSource = getattr(self.params, "calls_source", "auto")
        self._scope: Scope = getattr(self.params, "scope", "flatten")

    # ----------------------------------------------------------------- configuration

    @classmethod
    def validate_params(cls, params: Mapping[str, Any] | ScorerParams | None) -> ScorerParams:
        """Validate raw parameters into the scorer's model, or raise :class:`ScorerConfigError`."""
        if isinstance(params, cls.Params):
            return params
        if isinstance(params, ScorerParams):
            params = params.model_dump()
        raw = dict(params or {})
        try:
            return cls.Params.model_validate(raw)
        except pydantic.ValidationError as exc:
            raise ScorerConfigError(cls.kind, _explain_validation(cls.kind, cls.Params, exc)) from None

    @classmethod
    def param_defaults(cls) -> dict[str, Any]:
        """The default parameters as JSON (catalogue, docs); required ones appear with their default None."""
        return cls.Params.model_construct().model_dump(mode="json", warnings=False)

    def variant(self) -> str | None:
        """Short variant label for the default instance id (``kind:variant``); None = plain ``kind``."""
        return None

    def default_id(self) -> str:
        v = self.variant()
        return self.kind if not v else f"{self.kind}:{v}"

    @property
    def threshold(self) -> float | None:
        return self.params.threshold

    # ----------------------------------------------------------------- what subclasses implement

    @abc.abstractmethod
    def evaluate(self, run: Run, reference: Expectation | None) -> Evaluation:
        """Score one run (one turn). May raise; :meth:`score` turns exceptions into errors."""

    def evaluate_conversation(self, runs: Sequence[Run], references: Sequence[Expectation | None]) -> Evaluation:
        """Score several turns as one conversation (``turn_mode = "concatenate"``).

        Scorers with ``turn_mode = "concatenate"`` override this, typically with
        ``self.conversation_calls(runs)`` and :func:`merge_expectations`; the default raises
        (which :meth:`score_turns` reports as ``error/internal``).
        """
        raise NotImplementedError(f"scorer {self.kind!r} does not score concatenated conversations")

    # ----------------------------------------------------------------- view helpers

    def calls(self, run: Run) -> tuple[ToolCall, ...]:
        """The run's calls through the configured view (``calls_source``/``scope`` params when present)."""
        return view(run, self._calls_source, self._scope)

    def conversation_calls(self, runs: Sequence[Run]) -> tuple[ToolCall, ...]:
        return conversation_calls(runs, self._calls_source, self._scope)

    def arguments_gate(self, calls: Sequence[ToolCall]) -> NotScored | str | None:
        """§1.4 for the calls whose arguments the scorer must compare.

        Returns None when every call has captured arguments (compare normally); the string
        ``"names_only"`` when some are ABSENT and ``on_missing_arguments == "names_only"`` (the
        caller switches argument comparison off and sets ``degraded``); else
        ``NotScored(not_applicable, arguments_not_captured)``.
        """
        if all(c.args is not ABSENT for c in calls):
            return None
        if getattr(self.params, "on_missing_arguments", "not_applicable") == "names_only":
            return "names_only"
        missing = [c.index for c in calls if c.args is ABSENT]
        return NotScored.na("arguments_not_captured", calls_without_arguments=missing)

    # ----------------------------------------------------------------- the safe entry points

    def score(self, run: Run, reference: Expectation | None, *, scored_at: str | None = None) -> ScoreResult:
        """Score one run. Never raises: an exception becomes ``error/internal``.

        The result is built once, with its final fields: the run's identity (``trace_id``,
        ``run_id``, ``agent``, ``conversation_id``) and ``scored_at`` as given (the scoring stage
        passes its clock reading; None leaves it unset).
        """
        try:
            return self._wrap(run, self.evaluate(run, reference), scored_at)
        except Exception as exc:
            return self._internal_error(run, exc, scored_at)

    def score_turns(self, turns: Sequence[tuple[Run, Expectation | None]]) -> ScoreResult:
        """Score a multi-turn case (§1.5). Never raises.

        ``mean``: each turn is evaluated; any ``error`` turn makes the result that error; turns
        that are ``not_applicable`` are left out of the mean (all of them → the first turn's
        not-applicable reason); ``score`` = mean of the scored turns, ``passed`` = mean ≥
        threshold, issues carry their ``turn``, ``details.turn_scores`` lists every turn (None for
        not-applicable). ``concatenate``: :meth:`evaluate_conversation` over all turns.
        A single turn is the same as :meth:`score`. Identity fields come from the first run.
        """
        if not turns:
            raise ValueError("score_turns needs at least one turn")
        first = turns[0][0]
        try:
            if len(turns) == 1:
                return self._wrap(first, self.evaluate(*turns[0]))
            if self.turn_mode == "concatenate":
                runs = [t[0] for t in turns]
                refs = [t[1] for t in turns]
                return self._wrap(first, self.evaluate_conversation(runs, refs))
            return self._wrap(first, self.mean_over_turns([self.evaluate(r, e) for r, e in turns]))
        except Exception as exc:
            return self._internal_error(first, exc)

    def score_case(self, runs: Sequence[Run], references: Sequence[Expectation | None]) -> ScoreResult:
        """Score an offline case: actual runs (one per turn) against the case's per-turn expectations.

        Different turn counts → ``error/invocation_count_mismatch`` (ADK raises); otherwise
        :meth:`score_turns`. Never raises.
        """
        if not runs:
            return self.error(None, "runner_failed", {"message": "no actual run"})
        if len(runs) != len(references):
            return self.error(
                runs[0], "invocation_count_mismatch", {"actual_turns": len(runs), "expected_turns": len(references)}
            )
        return self.score_turns(list(zip(runs, references, strict=True)))

    def score_pooled(
        self, repetitions: Sequence[Sequence[Run]], references: Sequence[Expectation | None]
    ) -> ScoreResult:
        """Score N repetitions (``runs: N``) of one case, pooling every (run, turn) evaluation (ADK).

        Each repetition must have one run per expected turn, else ``error/invocation_count_mismatch``.
        ``mean`` scorers average all (run, turn) scores at once (ADK ``AgentEvaluator`` pools
        them); ``concatenate`` scorers average the per-repetition conversation scores. Never raises.
        """
        if not repetitions or not repetitions[0]:
            return self.error(None, "runner_failed", {"message": "no actual run"})
        first = repetitions[0][0]
        for runs in repetitions:
            if len(runs) != len(references):
                return self.error(
                    first, "invocation_count_mismatch", {"actual_turns": len(runs), "expected_turns": len(references)}
                )
        try:
            evaluations: list[Evaluation] = []
            for runs in repetitions:
                if self.turn_mode == "concatenate" and len(runs) > 1:
                    evaluations.append(self.evaluate_conversation(runs, references))
                else:
                    evaluations.extend(self.evaluate(r, e) for r, e in zip(runs, references, strict=True))
            if len(evaluations) == 1:
                return self._wrap(first, evaluations[0])
            return self._wrap(first, self.mean_over_turns(evaluations))
        except Exception as exc:
            return self._internal_error(first, exc)

    def mean_over_turns(self, evaluations: Sequence[Evaluation]) -> Evaluation:
        """Combine per-turn (or per run × turn) evaluations by the ``mean`` rule of :meth:`score_turns`."""
        total = 0.0
        count = 0
        issues: list[Issue] = []
        degraded: str | None = None
        turn_scores: list[float | None] = []
        turn_details: list[dict[str, Any]] = []
        for i, ev in enumerate(evaluations):
            if isinstance(ev, Outcome):
                total += ev.score
                count += 1
                for issue in ev.issues:
                    issues.append(_with_turn(issue, i) if issue.turn is None else issue)
                if degraded is None and ev.degraded:
                    degraded = ev.degraded
                turn_scores.append(ev.score)
            elif ev.status == "error":
                return ev
            else:
                turn_scores.append(None)
            turn_details.append(dict(ev.details))
        if not count:
            return evaluations[0]  # every turn not applicable: the first one's reason
        return Outcome(
            total / count,
            None,
            tuple(issues),
            {"turn_scores": turn_scores, "turn_details": turn_details},
            degraded,
        )

    # ----------------------------------------------------------------- result builders
    # Each builder makes the final ScoreResult in one construction (no dataclasses.replace after):
    # scorer identity from the instance, run identity from ``run``, ``scored_at`` as given.

    def _result(
        self,
        run: Run | None,
        status: Status,
        score: float | None,
        threshold: float | None,
        passed: bool | None,
        reason: str | None,
        degraded: str | None,
        issues: tuple[Issue, ...],
        details: dict[str, Any],
        scored_at: str | None,
    ) -> ScoreResult:
        # positional, in ScoreResult's field order (tests/scoring/test_base.py checks it field by field)
        if run is None:
            trace_id = run_id = agent = conversation_id = None
        else:
            trace_id, run_id, agent, conversation_id = run.trace_id, run.run_id, run.agent, run.conversation_id
        return ScoreResult(
            self.id,
            self.kind,
            self.version,
            status,
            score,
            threshold,
            passed,
            reason,
            degraded,
            issues,
            details,
            self.params_json,
            self.params_hash,
            None,
            trace_id,
            run_id,
            agent,
            conversation_id,
            None,
            None,
            None,
            scored_at,
        )

    def scored(
        self,
        run: Run | None,
        score: float,
        *,
        passed: bool | None = None,
        threshold: float | None = None,
        issues: Sequence[Issue] = (),
        details: Mapping[str, Any] | None = None,
        degraded: str | None = None,
        scored_at: str | None = None,
    ) -> ScoreResult:
        """A ``scored`` result; ``passed`` defaults to ``score >= threshold``.

        Raises ``ValueError`` for a score outside [0, 1] or NaN (reported as ``error/internal``).
        """
        if not isinstance(score, _NUMBER) or not 0.0 <= score <= 1.0:  # NaN fails the range test
            raise ValueError(f"scorer {self.kind!r} produced score {score!r} outside [0, 1]")
        thr = self.threshold if threshold is None else threshold
        if passed is None:
            passed = None if thr is None else score >= thr
        return self._result(
            run,
            "scored",
            float(score),
            thr,
            passed,
            None,
            degraded,
            tuple(issues),
            dict(details) if details else {},
            scored_at,
        )

    def not_applicable(
        self, run: Run | None, reason: str, details: Mapping[str, Any] | None = None, *, scored_at: str | None = None
    ) -> ScoreResult:
        """A ``not_applicable`` result with a §1.4 reason code (``ValueError`` for another code)."""
        if reason not in NOT_APPLICABLE_REASONS:
            raise ValueError(f"not_applicable reason {reason!r} is not one of {sorted(NOT_APPLICABLE_REASONS)}")
        return self._unscored(run, "not_applicable", reason, details, scored_at)

    def error(
        self, run: Run | None, reason: str, details: Mapping[str, Any] | None = None, *, scored_at: str | None = None
    ) -> ScoreResult:
        """An ``error`` result with a §1.4 / §4.0 reason code (``ValueError`` for another code)."""
        if reason not in ERROR_REASONS:
            raise ValueError(f"error reason {reason!r} is not one of {sorted(ERROR_REASONS)}")
        return self._unscored(run, "error", reason, details, scored_at)

    def _unscored(
        self,
        run: Run | None,
        status: Literal["not_applicable", "error"],
        reason: str,
        details: Mapping[str, Any] | None,
        scored_at: str | None,
    ) -> ScoreResult:
        """A result without a score (``not_applicable`` or ``error``) with its reason and details."""
        return self._result(
            run, status, None, self.threshold, None, reason, None, (), dict(details) if details else {}, scored_at
        )

    def _wrap(self, run: Run, evaluation: Evaluation, scored_at: str | None = None) -> ScoreResult:
        """The final result of an evaluation (see :meth:`scored`, :meth:`not_applicable`, :meth:`error`)."""
        if isinstance(evaluation, NotScored):
            # NotScored validated its reason on construction
            return self._result(
                run,
                evaluation.status,
                None,
                self.threshold,
                None,
                evaluation.reason,
                None,
                (),
                dict(evaluation.details),
                scored_at,
            )
        # an Outcome: what scored() does, without its keyword layer (the hot path of every scored run)
        score = evaluation.score
        if not isinstance(score, _NUMBER) or not 0.0 <= score <= 1.0:  # NaN fails the range test
            raise ValueError(f"scorer {self.kind!r} produced score {score!r} outside [0, 1]")
        thr = self.threshold if evaluation.threshold is None else evaluation.threshold
        passed = evaluation.passed
        if passed is None:
            passed = None if thr is None else score >= thr
        details = evaluation.details
        return self._result(
            run,
            "scored",
            float(score),
            thr,
            passed,
            None,
            evaluation.degraded,
            tuple(evaluation.issues),
            dict(details) if details else {},
            scored_at,
        )

    def _internal_error(self, run: Run | None, exc: BaseException, scored_at: str | None = None) -> ScoreResult:
        return self.error(
            run, "internal", {"exception": type(exc).__name__, "message": str(exc)[:500]}, scored_at=scored_at
        )


# --------------------------------------------------------------------------- helpers


_NUMBER = (int, float)


def _with_turn(issue: Issue, turn: int) -> Issue:
    """``issue`` with its ``turn`` set (one construction; ``dataclasses.replace`` would introspect)."""
    i = issue
    return Issue(i.kind, i.severity, i.tool, i.parameter, i.call_index, i.call_id, i.expected, i.actual, i.detail, turn)


def expected_args(call: ExpectedCall, *, absent_as: Any = ABSENT) -> Any:
    """An expected call's ``args``, ABSENT (unspecified) mapped to ``absent_as`` (peers ``{}``, ADK None)."""
    return absent_as if call.args is ABSENT else call.args


def args_dict(value: Any) -> dict[str, Any] | None:
    """The arguments as a dict when they are a JSON object, else None (ABSENT, Malformed, non-object)."""
    if isinstance(value, Malformed) or value is ABSENT:
        return None
    return value if isinstance(value, dict) else None


def _explain_validation(kind: str, model: type[pydantic.BaseModel], exc: pydantic.ValidationError) -> list[str]:
    known = sorted(model.model_fields)
    problems: list[str] = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(parameters)"
        if err["type"] == "extra_forbidden":
            name = str(err["loc"][0]) if err["loc"] else loc
            hint = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            fix = f"did you mean {hint[0]!r}?" if hint else f"known parameters: {', '.join(known)}"
            problems.append(f"unknown parameter {loc!r}: remove it ({fix})")
        else:
            value = err.get("input")
            problems.append(f"parameter {loc!r} = {value!r} is invalid: {err['msg']}")
    return problems
