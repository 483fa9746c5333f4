"""``unknown_tool_check`` — hallucinated tool names (SCORING.md §3.2).

Contract: for each call, the offered set ``O`` = names of its definitions (emitting step →
owning run → catalogue, as §3.1) ∪ ``allowed_tools`` (the expectation's and this scorer's;
``fnmatchcase`` patterns allowed) ∪ agent names of the run's nested runs. A call whose ``O`` is
unknown (no definitions anywhere) is unchecked; all unchecked → ``not_applicable/
no_tool_definitions``. A call is ``hallucinated_tool`` iff its name ∉ ``O`` and it was not
executed or its execution errored (§3.3 rule). A name ∉ ``O`` that executed without error gives
one ``tool_definitions_incomplete`` note per name (``info``), not flagged. ``detail.did_you_mean``
= the closest offered name with ``difflib.SequenceMatcher`` ratio ≥ 0.8, else None.
Score = 1 − hallucinated / checked.
"""

from __future__ import annotations

import difflib
from typing import Any, ClassVar

from monitor.scoring.base import Evaluation, Need, NotScored, Outcome, Scorer
from monitor.scoring.checks._common import CheckParams, Definitions, check_calls, matches_any
from monitor.scoring.expectation import Expectation
from monitor.scoring.result import FailureKind, Issue, NoteKind, Severity, call_issue
from monitor.trajectory.errors import call_error
from monitor.trajectory.model import Run, ToolDef

__all__ = ["SIMILARITY_CUTOFF", "UnknownToolCheck", "UnknownToolCheckParams", "did_you_mean"]

SIMILARITY_CUTOFF = 0.8


class UnknownToolCheckParams(CheckParams):
    """``allowed_tools``: names (or ``fnmatchcase`` globs) that are never hallucinated, added to the
    expectation's ``allowed_tools`` (provider server tools, framework internals such as
    pydantic-ai ``final_result``)."""

    allowed_tools: tuple[str, ...] = ()


def did_you_mean(name: str, offered: tuple[str, ...] | list[str]) -> str | None:
    """The offered name closest to ``name`` by ``SequenceMatcher.ratio`` when ≥ 0.8 (ties: first offered)."""
    best: str | None = None
    best_ratio = SIMILARITY_CUTOFF
    matcher = difflib.SequenceMatcher()
    matcher.set_seq2(name)
    for candidate in offered:
        if candidate == name:
            continue
        matcher.set_seq1(candidate)
        if matcher.real_quick_ratio() < best_ratio or matcher.quick_ratio() < best_ratio:
            continue
        ratio = matcher.ratio()
        if ratio > best_ratio or (best is None and ratio >= best_ratio):
            best, best_ratio = candidate, ratio
    return best


class UnknownToolCheck(Scorer[UnknownToolCheckParams]):
    """Calls of tools that were never offered (SCORING.md §3.2)."""

    kind: ClassVar[str] = "unknown_tool_check"
    version: ClassVar[int] = 1
    Params: ClassVar[type[UnknownToolCheckParams]] = UnknownToolCheckParams
    needs: ClassVar[frozenset[Need]] = frozenset({Need.TOOL_DEFINITIONS})
    summary: ClassVar[str] = "tool names the model invented (not offered)"

    def evaluate(self, run: Run, reference: Expectation | None) -> Evaluation:
        calls = check_calls(self, run)
        if not calls:
            return NotScored.na("no_tool_calls")
        catalogue = reference.catalogue if reference is not None else None
        definitions = Definitions(run, catalogue)
        allowed = (*self.params.allowed_tools, *(reference.allowed_tools if reference is not None else ()))
        agents = {r.agent for r in run.walk() if r is not run and r.agent}

        names_by_source: dict[int, tuple[frozenset[str], tuple[str, ...]]] = {}

        def offered(tools: tuple[ToolDef, ...]) -> tuple[frozenset[str], tuple[str, ...]]:
            entry = names_by_source.get(id(tools))
            if entry is None:
                ordered = tuple(dict.fromkeys([*(t.name for t in tools), *sorted(agents)]))
                entry = (frozenset(ordered), ordered)
                names_by_source[id(tools)] = entry
            return entry

        issues: list[Issue] = []
        notes: list[Issue] = []
        noted: set[str] = set()
        checked = flagged = unchecked = 0
        for call in calls:
            source = definitions.source(call)
            if source is None:
                unchecked += 1
                continue
            checked += 1
            names, ordered = offered(source.tools)
            if call.name in names or matches_any(call.name, allowed) is not None:
                continue
            error = call_error(call)
            if call.executed and error is None:
                if call.name not in noted:
                    noted.add(call.name)
                    notes.append(
                        call_issue(
                            NoteKind.TOOL_DEFINITIONS_INCOMPLETE,
                            call,
                            severity=Severity.INFO,
                            detail=f"{call.name!r} executed without error but is not in the "
                            f"{source.origin} definitions",
                        )
                    )
                continue
            flagged += 1
            issues.append(
                call_issue(
                    FailureKind.HALLUCINATED_TOOL,
                    call,
                    actual=call.name,
                    detail={
                        "did_you_mean": did_you_mean(call.name, ordered),
                        "executed": call.executed,
                        "error_type": error.type if error is not None else None,
                        "definitions": source.origin,
                    },
                )
            )
        details: dict[str, Any] = {"checked": checked, "hallucinated": flagged, "unchecked": unchecked}
        if checked == 0:
            return NotScored.na("no_tool_definitions", **details)
        return Outcome(score=1.0 - flagged / checked, issues=(*issues, *notes), details=details)
