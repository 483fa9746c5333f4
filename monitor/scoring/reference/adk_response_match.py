"""``adk_response_match``: Google ADK ``response_match_score`` (``RougeEvaluator``), SCORING.md §2.9.

Peer: google-adk 2.13.0, ``google/adk/evaluation/final_response_match_v1.py``
(``RougeEvaluator``, ``_calculate_rouge_1_scores``, ``_UnicodeAwareTokenizer``, ``_is_cjk``,
``_is_non_spaced_script``, ``_is_word_char``); rouge-score 0.1.2 ``rouge_score/rouge_scorer.py``,
``tokenize.py``, ``tokenizers.py`` (``DefaultTokenizer`` with nltk's ``PorterStemmer``).

Score per turn = ROUGE-1 F-measure of ``rouge_score`` (reference = expected response, candidate =
final response; a missing text is ``""``, so two empty texts score 0.0); a case is the mean over
turns (and runs, :meth:`~monitor.scoring.base.Scorer.score_pooled`).

Tokenizers: ``adk`` (default) is our own implementation of ADK 2.13.0's Unicode-aware tokenizer
(NFKC + ``str.lower``, CJK characters as tokens, Thai/Lao/Khmer/Myanmar clusters, ASCII words
through ``rouge_score``'s stemming tokenizer); ``rouge_score`` is ``rouge_score``'s default
tokenizer with stemming (ADK 1.x).
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache
from typing import Any, ClassVar, Literal

from rouge_score import rouge_scorer, tokenizers

from monitor.scoring.base import Evaluation, Need, NotScored, Outcome, Scorer, ScorerParams, Threshold
from monitor.scoring.expectation import Expectation
from monitor.scoring.result import FailureKind, Issue
from monitor.trajectory.model import Run

__all__ = ["AdkResponseMatch", "AdkResponseMatchParams", "AdkUnicodeTokenizer", "rouge1"]


def _is_cjk(c: str) -> bool:
    o = ord(c)
    return 0x4E00 <= o <= 0x9FFF or 0x3040 <= o <= 0x30FF or 0xAC00 <= o <= 0xD7AF


def _is_non_spaced(c: str) -> bool:
    o = ord(c)
    return 0x0E00 <= o <= 0x0E7F or 0x0E80 <= o <= 0x0EFF or 0x1780 <= o <= 0x17FF or 0x1000 <= o <= 0x109F


def _is_mark(c: str) -> bool:
    return unicodedata.category(c).startswith("M")


class AdkUnicodeTokenizer(tokenizers.Tokenizer):  # type: ignore[misc]
    """ADK 2.13.0 ``_UnicodeAwareTokenizer(use_stemmer=True)`` behaviour (SCORING.md §2.9)."""

    def __init__(self, use_stemmer: bool = True) -> None:
        self._ascii = tokenizers.DefaultTokenizer(use_stemmer=use_stemmer)

    def tokenize(self, text: str) -> list[str]:
        s = unicodedata.normalize("NFKC", text).lower()
        pieces: list[str] = []
        for c in s:
            if _is_cjk(c):
                pieces.append(f" {c} ")
            elif _is_non_spaced(c):
                pieces.append(c if _is_mark(c) else f" {c}")
            elif c.isalnum() or _is_mark(c):
                pieces.append(c)
            else:
                pieces.append(" ")
        tokens: list[str] = []
        for word in "".join(pieces).split():
            if word.isascii():
                tokens.extend(self._ascii.tokenize(word))
            else:
                tokens.append(word)
        return tokens


@lru_cache(maxsize=2)
def _scorer(tokenizer: str) -> Any:
    if tokenizer == "adk":
        return rouge_scorer.RougeScorer(["rouge1"], tokenizer=AdkUnicodeTokenizer(use_stemmer=True))
    return rouge_scorer.RougeScorer(["rouge1"], use_stemmer=True)


def rouge1(reference: str, candidate: str, tokenizer: str = "adk") -> tuple[float, float, float]:
    """(precision, recall, F) of ROUGE-1 as ``rouge_score`` 0.1.2 computes it."""
    s = _scorer(tokenizer).score(reference, candidate)["rouge1"]
    return float(s.precision), float(s.recall), float(s.fmeasure)


class AdkResponseMatchParams(ScorerParams):
    tokenizer: Literal["adk", "rouge_score"] = "adk"
    threshold: Threshold = 0.8


class AdkResponseMatch(Scorer[AdkResponseMatchParams]):
    """ADK RougeEvaluator: ROUGE-1 F of the final response against the expected one."""

    kind: ClassVar[str] = "adk_response_match"
    version: ClassVar[int] = 1
    Params = AdkResponseMatchParams
    needs = frozenset({Need.REFERENCE, Need.FINAL_RESPONSE})
    turn_mode = "mean"
    summary = "Google ADK response_match_score: ROUGE-1 F with ADK's tokenizer (§2.9)"

    def variant(self) -> str | None:
        return None if self.params.tokenizer == "adk" else "rouge_score"

    def evaluate(self, run: Run, reference: Expectation | None) -> Evaluation:
        if reference is None:
            return NotScored.na("no_reference")
        ref = reference.expected_response or ""
        cand = run.final_response or ""
        p, r, f = rouge1(ref, cand, self.params.tokenizer)
        issues: tuple[Issue, ...] = ()
        if f < self.params.threshold:
            issues = (
                Issue(
                    FailureKind.RESPONSE_MISMATCH,
                    expected=ref[:200],
                    actual=cand[:200],
                    detail={"rouge1_precision": p, "rouge1_recall": r},
                ),
            )
        return Outcome(f, issues=issues, details={"precision": p, "recall": r, "fmeasure": f})
