"""The one internal form every golden-dataset loader produces (SCORING.md §6)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from monitor.scoring.expectation import Expectation
from monitor.scoring.spec import ScorerSpec
from monitor.trajectory.model import Messages, Run, ToolDef

__all__ = ["Case", "Dataset", "DatasetError", "DatasetSource", "Gate", "GateSpec", "ScorerSpec", "Turn"]

DatasetSource: TypeAlias = Literal["native", "adk", "adk_legacy", "ragas", "seed001", "seed000"]


@dataclass(frozen=True, slots=True)
class Turn:
    """One user turn of a case: what the user says and what the agent is expected to do."""

    input: Messages
    expectation: Expectation
    session_input: Mapping[str, Any] | None = None

    @property
    def text(self) -> str:
        return "\n".join(m.text for m in self.input if m.role == "user" and m.text)


@dataclass(frozen=True, slots=True)
class GateSpec:
    """Per-scorer gate: ``aggregate`` mean (ADK) or all; ``require`` makes not-applicable a failure."""

    threshold: float | None = None
    aggregate: Literal["mean", "all"] = "mean"
    min_mean: float | None = None
    require: bool = False


@dataclass(frozen=True, slots=True)
class Gate:
    min_pass_rate: float = 1.0
    runs: int = 1
    allow_errors: bool = False
    pass_rate_rounding: int | None = None
    scorers: Mapping[str, GateSpec] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Case:
    """One golden case: turns with expectations, optional tools and a recorded trajectory.

    ``actual``, when present, is the recorded trajectory (one Run per turn) and no runner is needed.
    ``tools`` overrides the tool definitions offered to the runner (and to schema checks).
    """

    id: str
    source: DatasetSource
    turns: tuple[Turn, ...]
    tools: tuple[ToolDef, ...] | None = None
    tags: tuple[str, ...] = ()
    config: Mapping[str, Any] = field(default_factory=dict)
    actual: tuple[Run, ...] | None = None
    file: str = ""


@dataclass(frozen=True, slots=True)
class Dataset:
    """Cases of one file, with the scorers and gate that file (or its source's defaults) asks for."""

    name: str
    source: DatasetSource
    file: str
    cases: tuple[Case, ...]
    scorers: tuple[ScorerSpec, ...]
    gate: Gate
    info: Mapping[str, Any] = field(default_factory=dict)


class DatasetError(ValueError):
    """A dataset that cannot be used: names the file, the JSON path and the problem (exit code 2)."""

    def __init__(self, file: str, path: str, problem: str) -> None:
        super().__init__(f"{file}: {path or '$'}: {problem}")
        self.file = file
        self.path = path
        self.problem = problem
