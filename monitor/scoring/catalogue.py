"""The one scorer registry: every scorer kind the monitor knows, code and judge alike.

Settings (``scoring.checks``, through :mod:`monitor.preflight`), rules files
(:mod:`monitor.rules`), golden datasets and gate files (:mod:`monitor.rules.datasets`,
:mod:`monitor.evaluation`), the scoring stage and the CLI (``monitor scorers``, ``monitor score``)
all read it; nothing else keeps a list of scorer names.

For each kind the registry holds (:class:`ScorerInfo`):

* ``kind`` — the name configurations use (a configured scorer's ``kind`` defaults to its id's part
  before ``:``, :func:`kind_of`);
* ``kind_class`` — ``code`` (pure, run inline) or ``judge`` (an LLM judge, SCORING.md §4; judge kinds
  start with :data:`JUDGE_KIND_PREFIX`). The §4 judges are registered even before they are
  implemented (``cls`` None): a configuration may name them, and they are then reported as
  ``not_applicable/judges_disabled``;
* ``params_model`` — the accepted parameters (a :class:`~monitor.scoring.base.ScorerParams` model:
  names, types, defaults; unknown names are errors). A judge without an implementation accepts any
  parameter but ``threshold`` must be a fraction (``params_open``);
* ``peer`` and ``section`` — the peer library whose numbers the scorer reproduces (SCORING.md §7;
  ``ours`` for our own checks) and its section of SCORING.md.

Code scorer classes are discovered as concrete subclasses of :class:`~monitor.scoring.base.Scorer`
that define ``kind`` and live in the packages of :data:`SCORER_PACKAGES` (imported first; a package
that does not exist yet is skipped); two classes with one ``kind`` are a programming error. A judge class found
there replaces the judge's declaration.

A name that is not registered is a configuration error: :func:`lookup` raises
:class:`UnknownScorerKind` (a :class:`~monitor.scoring.base.ScorerConfigError`) with the close
matches (:func:`suggest`, ``difflib.get_close_matches``); :func:`validate_params` reports unknown or
invalid parameters; :func:`build` makes an instance from configuration (``{id?, kind, params?}``).
"""

from __future__ import annotations

import difflib
import importlib
import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final, Literal, TypeAlias

import pydantic

from monitor.scoring.base import Need, Scorer, ScorerConfigError, ScorerParams, TurnMode, _explain_validation

__all__ = [
    "JUDGE_KIND_PREFIX",
    "SCORER_PACKAGES",
    "KindClass",
    "ScorerInfo",
    "UndeclaredJudgeParams",
    "UnknownScorerKind",
    "build",
    "catalogue",
    "code_kinds",
    "describe",
    "is_judge_kind",
    "judge_kinds",
    "kind_of",
    "kinds",
    "lookup",
    "scorer_class",
    "scorer_classes",
    "suggest",
    "validate_params",
]

SCORER_PACKAGES = ("monitor.scoring.reference", "monitor.scoring.checks", "monitor.scoring.judges")

JUDGE_KIND_PREFIX: Final = "judge_"
"""Scorer kinds starting with this prefix are LLM judges (SCORING.md §4), never run inline."""

KindClass: TypeAlias = Literal["code", "judge"]


def is_judge_kind(kind: str) -> bool:
    """True for names of the judge form (``judge_*``); whether the kind is registered is :func:`lookup`'s job."""
    return kind.startswith(JUDGE_KIND_PREFIX)


def kind_of(scorer_id: str, kind: str | None = None) -> str:
    """The kind of a configured scorer: its ``kind`` when given, else its id's part before ``:``
    (``tool_eval:literal`` → ``tool_eval``)."""
    return kind or scorer_id.split(":", 1)[0]


# --------------------------------------------------------------------------- what SCORING.md says

_PEERS: Final[Mapping[str, tuple[str, str]]] = {
    # kind: (SCORING.md section, the peer whose numbers it reproduces, §7)
    "tool_eval": ("§2.1", "seed-000 ToolEvaluator"),
    "tools_selected": ("§2.2", "seed-001 toolsSelected"),
    "tools_avoided": ("§2.2", "seed-001 toolsAvoided"),
    "tool_selection_f1": ("§2.2", "seed-001 toolSelectionScore"),
    "trajectory_match": ("§2.3", "agentevals 0.0.9 trajectory match"),
    "adk_tool_trajectory": ("§2.4", "google-adk 2.13.0 tool_trajectory_avg_score"),
    "ragas_tool_call_accuracy": ("§2.5", "ragas 0.4.3 ToolCallAccuracy"),
    "ragas_tool_call_f1": ("§2.6", "ragas 0.4.3 ToolCallF1"),
    "mastra_tool_call_accuracy": ("§2.7", "@mastra/evals 1.10.2 tool-call-accuracy (code)"),
    "deepeval_tool_correctness": ("§2.8", "deepeval 4.3.1 ToolCorrectnessMetric"),
    "adk_response_match": ("§2.9", "google-adk 2.13.0 response_match_score"),
    "ragas_topic_adherence": ("§2.10", "ragas 0.4.3 TopicAdherenceScore"),
    "schema_check": ("§3.1", "ours"),
    "unknown_tool_check": ("§3.2", "ours"),
    "tool_error_check": ("§3.3", "ours"),
    "repetition_check": ("§3.4", "ours"),
    "call_budget_check": ("§3.5", "ours"),
    "latency_check": ("§3.6", "ours"),
    "no_tool_needed_check": ("§3.7", "ours"),
    "forbidden_tool_check": ("§3.8", "ours"),
    "judge_tool_selection": ("§4.1", "@mastra/evals tool-call-accuracy (LLM)"),
    "judge_argument_correctness": ("§4.2", "deepeval ArgumentCorrectnessMetric"),
    "judge_goal_accuracy": ("§4.3", "ragas AgentGoalAccuracy"),
    "judge_topic_adherence": ("§4.4", "ragas TopicAdherenceScore"),
    "judge_trajectory_quality": ("§4.5", "agentevals trajectory judge / ADK rubric judges"),
}


class UndeclaredJudgeParams(ScorerParams):
    """Parameters of a judge that has no implementation yet: ``threshold`` must be a fraction; any
    other parameter is kept as given until the judge declares its own model."""

    model_config = pydantic.ConfigDict(extra="allow")


@dataclass(frozen=True, slots=True)
class _JudgeDeclaration:
    summary: str
    needs: frozenset[Need]
    turn_mode: TurnMode


_JUDGES: Final[Mapping[str, _JudgeDeclaration]] = {
    "judge_tool_selection": _JudgeDeclaration(
        "Were the called tools appropriate for the request, and which were missed? (LLM judge)",
        frozenset({Need.USER_INPUT}),
        "mean",
    ),
    "judge_argument_correctness": _JudgeDeclaration(
        "Do each call's arguments correctly address the user input? (LLM judge)",
        frozenset({Need.USER_INPUT, Need.ARGUMENTS}),
        "mean",
    ),
    "judge_goal_accuracy": _JudgeDeclaration(
        "Was the user's goal (or the reference outcome) achieved? (LLM judge)",
        frozenset({Need.USER_INPUT}),
        "mean",
    ),
    "judge_topic_adherence": _JudgeDeclaration(
        "Did the agent stay on the reference topics? (LLM judge labels, §2.10 counting)",
        frozenset({Need.USER_INPUT}),
        "concatenate",
    ),
    "judge_trajectory_quality": _JudgeDeclaration(
        "Is the trajectory sensible and efficient, or does it meet the rubrics? (LLM judge)",
        frozenset(),
        "mean",
    ),
}
"""The §4 judge kinds, registered before they are implemented."""


# --------------------------------------------------------------------------- the registry


@dataclass(frozen=True, slots=True)
class ScorerInfo:
    """What the registry knows about one scorer kind (see the module docstring)."""

    kind: str
    kind_class: KindClass
    cls: type[Scorer[Any]] | None
    params_model: type[ScorerParams]
    params_open: bool
    version: int
    summary: str
    doc: str
    needs: tuple[str, ...]
    turn_mode: str
    defaults: dict[str, Any]
    params_schema: dict[str, Any]
    peer: str
    section: str
    defaults_problem: str | None = None

    @property
    def implemented(self) -> bool:
        """False for a judge that is registered but has no implementation yet."""
        return self.cls is not None

    @property
    def builds_with_defaults(self) -> bool:
        """False when the kind needs parameters (``defaults_problem`` says which), e.g.
        ``mastra_tool_call_accuracy`` without ``expected_tool``: it cannot be a ``scoring.checks`` entry."""
        return self.defaults_problem is None

    @property
    def parameters(self) -> tuple[str, ...]:
        """The declared parameter names (a judge without implementation: only ``threshold``)."""
        return tuple(self.params_model.model_fields)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "kind_class": self.kind_class,
            "implemented": self.implemented,
            "version": self.version,
            "peer": self.peer,
            "section": self.section,
            "summary": self.summary,
            "needs": list(self.needs),
            "turn_mode": self.turn_mode,
            "defaults": self.defaults,
            "defaults_problem": self.defaults_problem,
            "params_schema": self.params_schema,
        }


def _subclasses(cls: type[Any]) -> list[type[Any]]:
    out: list[type[Any]] = []
    for sub in cls.__subclasses__():
        out.append(sub)
        out.extend(_subclasses(sub))
    return out


def _info_for_class(cls: type[Scorer[Any]]) -> ScorerInfo:
    kind = cls.kind
    doc = inspect.getdoc(cls) or ""
    module_doc = inspect.getdoc(inspect.getmodule(cls)) or ""
    section, peer = _PEERS.get(kind, ("", "ours"))
    try:
        cls.validate_params({})
        defaults_problem = None
    except ScorerConfigError as exc:
        defaults_problem = "; ".join(exc.problems).replace("Value error, ", "")
    return ScorerInfo(
        kind=kind,
        kind_class="judge" if is_judge_kind(kind) else "code",
        cls=cls,
        params_model=cls.Params,
        params_open=False,
        version=cls.version,
        summary=cls.summary or (doc.splitlines()[0] if doc else ""),
        doc=f"{doc}\n\n{module_doc}".strip(),
        needs=tuple(sorted(str(n) for n in cls.needs)),
        turn_mode=cls.turn_mode,
        defaults=cls.param_defaults(),
        params_schema=cls.Params.model_json_schema(),
        peer=peer,
        section=section,
        defaults_problem=defaults_problem,
    )


def _info_for_judge(kind: str, decl: _JudgeDeclaration) -> ScorerInfo:
    section, peer = _PEERS[kind]
    return ScorerInfo(
        kind=kind,
        kind_class="judge",
        cls=None,
        params_model=UndeclaredJudgeParams,
        params_open=True,
        version=0,
        summary=decl.summary,
        doc=f"{decl.summary}\n\nSCORING.md {section}; not implemented yet: results are not_applicable/judges_disabled.",
        needs=tuple(sorted(str(n) for n in decl.needs)),
        turn_mode=decl.turn_mode,
        defaults=UndeclaredJudgeParams.model_construct().model_dump(mode="json"),
        params_schema=UndeclaredJudgeParams.model_json_schema(),
        peer=peer,
        section=section,
    )


def _in_scorer_packages(cls: type[Any]) -> bool:
    """Only the monitor's own scorer packages register kinds (a subclass defined elsewhere, in a test
    say, does not change the registry)."""
    return any(cls.__module__ == pkg or cls.__module__.startswith(pkg + ".") for pkg in SCORER_PACKAGES)


@lru_cache(maxsize=1)
def catalogue() -> dict[str, ScorerInfo]:
    """Every registered scorer kind (code and judge), sorted by kind."""
    for pkg in SCORER_PACKAGES:
        try:
            importlib.import_module(pkg)
        except ModuleNotFoundError as exc:
            if exc.name is None or not pkg.startswith(exc.name):
                raise
    found: dict[str, ScorerInfo] = {}
    for cls in _subclasses(Scorer):
        if inspect.isabstract(cls) or "kind" not in cls.__dict__ or not _in_scorer_packages(cls):
            continue
        kind = cls.kind
        known = found.get(kind)
        if known is not None and known.cls is not cls:
            raise RuntimeError(f"scorer kind {kind!r} is defined twice: {known.cls!r} and {cls!r}")
        found[kind] = _info_for_class(cls)
    for kind, decl in _JUDGES.items():
        found.setdefault(kind, _info_for_judge(kind, decl))
    return dict(sorted(found.items()))


def kinds() -> list[str]:
    """Every registered kind."""
    return list(catalogue())


def code_kinds() -> list[str]:
    return [k for k, info in catalogue().items() if info.kind_class == "code"]


def judge_kinds() -> list[str]:
    return [k for k, info in catalogue().items() if info.kind_class == "judge"]


def scorer_classes() -> dict[str, type[Scorer[Any]]]:
    """Kind → class of every implemented code kind (what the scoring stage runs inline). Judge classes are
    left out: they need a model client and run in the judge worker (:func:`scorer_class` and :func:`build`
    still return them)."""
    return {k: info.cls for k, info in catalogue().items() if info.cls is not None and info.kind_class == "code"}


# --------------------------------------------------------------------------- lookups


def suggest(name: str, *, n: int = 3) -> list[str]:
    """Registered kinds close to ``name`` (``difflib.get_close_matches``), best first."""
    return difflib.get_close_matches(name, kinds(), n=n, cutoff=0.6)


class UnknownScorerKind(ScorerConfigError):
    """A scorer kind that is not registered. ``suggestions``: the close matches, best first (may be
    empty); ``fix``: one sentence telling what to write instead (the best match)."""

    def __init__(self, kind: str, suggestions: list[str]) -> None:
        self.suggestions = tuple(suggestions)
        if suggestions:
            self.fix = f"did you mean {suggestions[0]!r}?"
        else:
            self.fix = "use a kind that `monitor scorers` lists"
        super().__init__(kind, [f"unknown scorer kind ({self.fix})"])


def lookup(kind: str) -> ScorerInfo:
    """The registry entry of ``kind``, or :class:`UnknownScorerKind` naming the close matches."""
    info = catalogue().get(kind)
    if info is None:
        raise UnknownScorerKind(kind, suggest(kind))
    return info


def scorer_class(kind: str) -> type[Scorer[Any]]:
    """The class of an implemented kind; :class:`UnknownScorerKind` for an unregistered one, a
    :class:`ScorerConfigError` for a judge that is registered but not implemented."""
    info = lookup(kind)
    if info.cls is None:
        raise ScorerConfigError(kind, ["this judge is not implemented yet (its results are judges_disabled)"])
    return info.cls


def validate_params(kind: str, params: Mapping[str, Any] | None = None) -> ScorerParams:
    """``params`` validated against the kind's parameter model (unknown kind or parameter, bad value:
    :class:`ScorerConfigError` naming it, with a did-you-mean)."""
    info = lookup(kind)
    if info.cls is not None:
        return info.cls.validate_params(params)
    try:
        return info.params_model.model_validate(dict(params or {}))
    except pydantic.ValidationError as exc:
        raise ScorerConfigError(kind, _explain_validation(kind, info.params_model, exc)) from None


def build(kind: str, params: Mapping[str, Any] | None = None, *, id: str | None = None) -> Scorer[Any]:
    """A validated scorer instance (raises :class:`ScorerConfigError` on a bad kind or parameter)."""
    return scorer_class(kind)(params, id=id)


def describe(kind: str) -> ScorerInfo:
    return lookup(kind)
