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

import re
import unicodedata
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, ClassVar, Literal

from rouge_score import tokenize as rouge_tokenize
from rouge_score import tokenizers

from monitor.scoring.base import Evaluation, Need, NotScored, Outcome, Scorer, ScorerParams, Threshold
from monitor.scoring.expectation import Expectation
from monitor.scoring.result import FailureKind, Issue
from monitor.trajectory.model import Run

__all__ = ["AdkResponseMatch", "AdkResponseMatchParams", "AdkUnicodeTokenizer", "rouge1", "tokens"]

Tokenizer = Literal["adk", "rouge_score"]

# rouge_score's DefaultTokenizer(use_stemmer=True) builds nltk's PorterStemmer() (default mode
# NLTK_EXTENSIONS); this is that class, reached through rouge_score's own import of it.
_STEMMER: Any = tokenizers.porter.PorterStemmer()

_ASCII_RUN = re.compile(r"[a-z0-9]+")
"""What survives ``rouge_score``'s tokenizer of lower-case text: every other character becomes a
space, and the text is split on whitespace."""


@lru_cache(maxsize=1 << 16)
def _run_tokens(run: str) -> tuple[str, ...]:
    """``rouge_score``'s stemming tokenizer on one ``[a-z0-9]+`` run (its own ``tokenize`` with the
    same stemmer: stemmed when longer than 3 characters, then the validity filter). Pure, so each
    distinct word is stemmed once per process (bounded LRU)."""
    return tuple(rouge_tokenize.tokenize(run, _STEMMER))


def _is_cjk(c: str) -> bool:
    o = ord(c)
    return 0x4E00 <= o <= 0x9FFF or 0x3040 <= o <= 0x30FF or 0xAC00 <= o <= 0xD7AF


def _is_non_spaced(c: str) -> bool:
    o = ord(c)
    return 0x0E00 <= o <= 0x0E7F or 0x0E80 <= o <= 0x0EFF or 0x1780 <= o <= 0x17FF or 0x1000 <= o <= 0x109F


def _is_mark(c: str) -> bool:
    return unicodedata.category(c).startswith("M")


def _rewrite(c: str) -> str:
    """ADK 2.13.0's per-character rewrite (after NFKC and ``str.lower``): a CJK character becomes its
    own token, a Thai/Lao/Khmer/Myanmar non-mark starts a cluster, word characters (alphanumeric or
    combining marks) stay, anything else is a space."""
    if _is_cjk(c):
        return f" {c} "
    if _is_non_spaced(c):
        return c if _is_mark(c) else f" {c}"
    if c.isalnum() or _is_mark(c):
        return c
    return " "


class _RewriteTable(dict[int, str]):
    """Code point → :func:`_rewrite`, filled on first use: the ``str.translate`` table of the ``adk``
    tokenizer (the rewrite depends on the character alone). Stops growing at 65,536 entries."""

    def __missing__(self, code: int) -> str:
        out = _rewrite(chr(code))
        if len(self) < 1 << 16:
            self[code] = out
        return out


_REWRITE = _RewriteTable()


def _adk_tokens(text: str) -> list[str]:
    """ADK 2.13.0 ``_UnicodeAwareTokenizer(use_stemmer=True).tokenize`` (SCORING.md §2.9)."""
    if text.isascii():
        # NFKC keeps ASCII as is, and every non-alphanumeric ASCII character becomes a space: the
        # words are the [a-z0-9] runs of the lower-cased text, each through rouge_score.
        words = _ASCII_RUN.findall(text.lower())
    else:
        words = unicodedata.normalize("NFKC", text).lower().translate(_REWRITE).split()
    out: list[str] = []
    for word in words:
        if word.isascii():
            out.extend(_run_tokens(word))  # an ASCII word here is an [a-z0-9] run
        else:
            out.append(word)
    return out


def _rouge_score_tokens(text: str) -> list[str]:
    """``rouge_score``'s ``DefaultTokenizer(use_stemmer=True)``: lower-case, every character outside
    ``[a-z0-9]`` a separator, each run stemmed as :func:`_run_tokens`."""
    out: list[str] = []
    for run in _ASCII_RUN.findall(text.lower()):
        out.extend(_run_tokens(run))
    return out


def tokens(text: str, tokenizer: Tokenizer = "adk") -> list[str]:
    """The ROUGE tokens of ``text`` with the named tokenizer (SCORING.md §2.9)."""
    return _adk_tokens(text) if tokenizer == "adk" else _rouge_score_tokens(text)


class AdkUnicodeTokenizer(tokenizers.Tokenizer):  # type: ignore[misc]
    """ADK 2.13.0 ``_UnicodeAwareTokenizer(use_stemmer=True)`` as a ``rouge_score`` tokenizer (for
    ``rouge_scorer.RougeScorer(["rouge1"], tokenizer=AdkUnicodeTokenizer())``)."""

    def __init__(self, use_stemmer: bool = True) -> None:
        if not use_stemmer:
            raise ValueError("ADK's RougeEvaluator always stems (use_stemmer=True)")

    def tokenize(self, text: str) -> list[str]:
        return _adk_tokens(text)


def _counts(items: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for t in items:
        counts[t] = counts.get(t, 0) + 1
    return counts


@lru_cache(maxsize=1024)
def _reference_counts(reference: str, tokenizer: Tokenizer) -> tuple[Mapping[str, int], int]:
    """The reference's unigram counts and token count (an expected response recurs on every run its
    rule or dataset case matches). Read-only."""
    toks = tokens(reference, tokenizer)
    return _counts(toks), len(toks)


def rouge1(reference: str, candidate: str, tokenizer: Tokenizer = "adk") -> tuple[float, float, float]:
    """(precision, recall, F) of ROUGE-1 exactly as ``rouge_score`` 0.1.2 computes it
    (``RougeScorer(["rouge1"], tokenizer=…).score(reference, candidate)``, ``_score_ngrams``):
    overlap = Σ over reference unigrams of min(counts), P = overlap / max(|cand|, 1),
    R = overlap / max(|ref|, 1), F = 2PR / (P + R), 0.0 when P + R = 0."""
    ref_counts, ref_len = _reference_counts(reference, tokenizer)
    cand = tokens(candidate, tokenizer)
    overlap = 0
    if ref_len and cand:
        cand_counts = _counts(cand)
        for token, n in ref_counts.items():
            m = cand_counts.get(token)
            if m:
                overlap += n if n < m else m
    precision = overlap / max(len(cand), 1)
    recall = overlap / max(ref_len, 1)
    fmeasure = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return precision, recall, fmeasure


class AdkResponseMatchParams(ScorerParams):
    tokenizer: Tokenizer = "adk"
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
        if f < self.params.threshold:  # the one issue is written only for a failed turn
            issues = (
                Issue(
                    FailureKind.RESPONSE_MISMATCH,
                    expected=ref[:200],
                    actual=cand[:200],
                    detail={"rouge1_precision": p, "rouge1_recall": r},
                ),
            )
        return Outcome(f, issues=issues, details={"precision": p, "recall": r, "fmeasure": f})
