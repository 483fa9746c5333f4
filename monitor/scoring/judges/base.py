"""The judge scorer contract (SCORING.md §4): a judge is a :class:`~monitor.scoring.base.Scorer` whose
number comes from an LLM verdict.

A judge splits into two pure halves around the API call:

* :meth:`Judge.prepare` — the run(s) and expectation → a :class:`Prepared` request (body, verdict
  check, how many samples) or a ``not_applicable`` :class:`~monitor.scoring.base.NotScored`;
* :meth:`Judge.decide` — the valid verdict(s) → the :class:`~monitor.scoring.base.Evaluation` (score
  rule of the peer, issues, details).

:func:`run_judge` runs the §4.0 exchange between them with an injected ``send`` (body → response dict;
raising :class:`JudgeUnavailable` when the API cannot answer) and returns the §5.1 record with the
``judge`` object (tokens summed over retries and samples, ``requests``). Cost and latency are the
caller's (``monitor.judging.runner``): the core has no clock and no price table.

Run inline (the scoring stage, an evaluation without a judge client), :meth:`Judge.evaluate` answers
``not_applicable/judges_disabled``: a judge never calls a model from the pure core.

Versioning (§4.0 "the prompt text is part of the scorer version"): ``version = major × 10⁸ +
int(prompt_hash[:6], 16)``, where ``prompt_hash`` is SHA-256 of the judge's prompt texts and verdict
schemas (:meth:`Judge.prompt_material`); editing a prompt changes the version and so re-keys results.
"""

from __future__ import annotations

import abc
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

import pydantic

from monitor.scoring.base import Evaluation, NotScored, Scorer, ScorerParams, canonical_json
from monitor.scoring.expectation import Expectation
from monitor.scoring.judges.protocol import (
    Block,
    JudgeConfig,
    Validate,
    build_request,
    render_catalogue,
    render_user_message,
    schema_errors,
)
from monitor.scoring.result import ScoreResult
from monitor.trajectory.model import Run, ToolDef

__all__ = [
    "Judge",
    "JudgeParams",
    "JudgeUnavailable",
    "Prepared",
    "Send",
    "prompt_version",
    "run_judge",
    "tools_for",
]

VERSION_BASE = 100_000_000


class JudgeParams(ScorerParams):
    """Parameters every judge accepts: ``model`` overrides the ``judge.model`` / ``judge.models`` setting."""

    model: str | None = pydantic.Field(None, min_length=1)


class JudgeUnavailable(Exception):
    """Raised by a ``send`` function when the API did not answer (after the SDK's retries)."""


Send = Callable[[dict[str, Any]], Mapping[str, Any]]
"""Sends one Messages request body; returns the response as a dict (``content``, ``stop_reason``, ``usage``)."""


@dataclass(frozen=True, slots=True)
class Prepared:
    """A rendered judge request. ``context`` carries what :meth:`Judge.decide` needs (index maps …)."""

    body: dict[str, Any]
    validate: Validate
    samples: int = 1
    truncated: bool = False
    context: Mapping[str, Any] = field(default_factory=dict)
    follow_up: Callable[[dict[str, Any]], Prepared] | None = None
    """A second request that depends on this one's verdict (Ragas' two calls): each sample sends it next."""
    combine: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]] | None = None
    """On a follow-up: the sample's verdict from the first verdict and its own (default: its own)."""


def prompt_version(major: int, material: Sequence[Any]) -> tuple[int, str]:
    """``(version, prompt_hash)`` of a judge: see the module docstring."""
    digest = hashlib.sha256(canonical_json(list(material)).encode("utf-8")).hexdigest()
    return major * VERSION_BASE + int(digest[:6], 16), digest[:12]


def tools_for(run: Run, reference: Expectation | None) -> tuple[ToolDef, ...] | None:
    """§4.0 S2: the run's own ``tools_offered`` (from its spans), else the configured catalogue."""
    if run.tools_offered is not None:
        return run.tools_offered
    if reference is not None and reference.catalogue is not None:
        return reference.catalogue
    return None


P = TypeVar("P", bound=JudgeParams)


class Judge(Scorer[P]):
    """Base of the §4 judges. Subclasses set ``kind``, ``major``, ``Params``, ``instructions`` and
    implement :meth:`prepare` / :meth:`decide` (and :meth:`prompt_material` when prompts vary)."""

    major: ClassVar[int] = 1
    prompt_hash: ClassVar[str] = ""
    instructions: ClassVar[str] = ""
    """Block S1 (instructions, rubric, examples); judges with variants override :meth:`system_blocks`."""
    uses_catalogue: ClassVar[bool] = False
    """Whether block S2 (the tool catalogue) is sent."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "kind" in cls.__dict__:
            cls.version, cls.prompt_hash = prompt_version(cls.major, cls.prompt_material())

    @classmethod
    def prompt_material(cls) -> list[Any]:
        """Every prompt text and verdict schema the judge can send (hashed into the version)."""
        return [cls.instructions]

    # ----------------------------------------------------------------- the two halves

    @abc.abstractmethod
    def prepare(self, runs: Sequence[Run], reference: Expectation | None, config: JudgeConfig) -> Prepared | Evaluation:
        """The request for ``runs`` (one run, or the turns of a conversation, last = current), or the
        evaluation itself when no verdict is needed (``not_applicable``, an ``empty_score``)."""

    @abc.abstractmethod
    def decide(self, verdicts: Sequence[dict[str, Any]], prepared: Prepared) -> Evaluation:
        """The evaluation from the valid verdicts (one per sample)."""

    def reason_of(self, verdicts: Sequence[dict[str, Any]]) -> str | None:
        """The record's ``reason``: the verdict's ``reason`` (first sample)."""
        reason = verdicts[0].get("reason") if verdicts else None
        return str(reason) if reason else None

    # ----------------------------------------------------------------- helpers for subclasses

    def request(
        self,
        config: JudgeConfig,
        blocks: Sequence[Block],
        schema: Mapping[str, Any],
        *,
        system: Sequence[str] | None = None,
        tools: Sequence[ToolDef] | None = None,
        check: Callable[[dict[str, Any]], str | None] | None = None,
        samples: int = 1,
        context: Mapping[str, Any] | None = None,
    ) -> Prepared:
        """A :class:`Prepared` request: S1 (``system`` or :attr:`instructions`), S2 when
        :attr:`uses_catalogue`, the user message from ``blocks``; the verdict is checked against ``schema``
        (Draft 2020-12), then by ``check`` (a judge-specific rule whose failure also triggers the repair)."""
        static = list(system if system is not None else [self.instructions])
        if self.uses_catalogue:
            static.append(render_catalogue(tools, config.max_field_chars))
        user, truncated = render_user_message(blocks, config.max_input_tokens)
        frozen_schema = dict(schema)

        def validate(verdict: Any) -> str | None:
            problem = schema_errors(frozen_schema, verdict)
            if problem is None and check is not None and isinstance(verdict, dict):
                problem = check(verdict)
            return problem

        return Prepared(
            build_request(config, static, user, frozen_schema),
            validate,
            samples,
            truncated,
            dict(context or {}),
        )

    # ----------------------------------------------------------------- inline use

    def evaluate(self, run: Run, reference: Expectation | None) -> Evaluation:
        """Inline (no model client): judges are disabled."""
        return NotScored.na("judges_disabled")

    def evaluate_conversation(self, runs: Sequence[Run], references: Sequence[Expectation | None]) -> Evaluation:
        return NotScored.na("judges_disabled")


def run_judge(
    judge: Judge[Any],
    runs: Run | Sequence[Run],
    reference: Expectation | None,
    config: JudgeConfig,
    send: Send,
) -> ScoreResult:
    """Prepare, run the §4.0 exchange(s) through ``send`` one request at a time and decide: the §5.1 record
    (:class:`~monitor.scoring.judges.task.JudgeTask` driven synchronously). Never raises (an exception in the
    judge's own code is ``error/internal``, as for every scorer)."""
    from monitor.scoring.judges.task import JudgeTask

    task = JudgeTask(judge, runs, reference, config)
    while not task.done:
        for request in task.pending(limit=1):
            try:
                response = send(request.body)
            except JudgeUnavailable as exc:
                task.fail(request.custom_id, str(exc))
                break
            task.feed(request.custom_id, response)
    return task.result()
