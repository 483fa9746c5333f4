"""How far a judge can be trusted: its agreement with a reference, and its failure rate corrected for its errors.

Pure statistics (no I/O, no clock, no randomness, standard library only), used by ``monitor judge calibrate``
(:mod:`monitor.commands.judge`).

**Convention.** *Positive* means **the run failed**: the thing a judge is there to detect. A pair is
(reference, judge) where the reference is a human label or a code scorer's verdict. Each side is ``"pass"``,
``"fail"``, ``"error"`` or ``"not_applicable"``; only pairs where both sides are ``"pass"``/``"fail"`` are
compared, the others are excluded and counted (judge errors, judge ``not_applicable``, reference missing).

====================  ==========================================================================================
TP / FP / TN / FN     reference fail & judge fail / reference pass & judge fail / pass & pass / fail & pass
n                     TP + FP + TN + FN (compared pairs)
accuracy              (TP + TN) / n
TPR (sensitivity)     TP / (TP + FN): the share of failed runs the judge catches
TNR (specificity)     TN / (TN + FP): the share of good runs the judge lets pass
Youden's J            TPR + TNR − 1 (0: no better than a coin; 1: perfect)
Cohen's kappa         κ = (p_o − p_e) / (1 − p_e), p_o = accuracy,
                      p_e = [(TP+FP)(TP+FN) + (FN+TN)(FP+TN)] / n² (Cohen 1960)
====================  ==========================================================================================

Accuracy, TPR and TNR come with **Wilson score intervals** (Wilson 1927; method 3 of Newcombe 1998, which
recommends it over the Wald interval for small samples and proportions near 0 or 1).

**Corrected failure rate.** A judge that flags ``p_obs`` of a set of runs over- or under-states the true failure
rate θ by its error rates: E[p_obs] = θ·TPR + (1 − θ)·(1 − TNR). Inverting gives the Rogan–Gladen estimator
(Rogan & Gladen 1978)::

    θ̂ = (p_obs + TNR − 1) / (TPR + TNR − 1),  clipped to [0, 1]

It is undefined when TPR + TNR − 1 ≤ 0 (the judge is no better than chance: its verdicts carry no information
on the failure rate) or when TPR or TNR cannot be measured (no failed, or no passing, run in the reference):
the estimate is then None with the reason, never a division by zero.

**Its confidence interval** accounts for the sampling error of p_obs (``n`` runs judged) *and* of TPR and TNR
(estimated on ``m₁ = TP + FN`` failed and ``m₀ = TN + FP`` passing reference runs, a sample independent of the
judged runs). Method: the adjusted delta-method interval of Lang & Reiczigel (2014), eq. 16–17 — the
Rogan–Gladen variance with Agresti–Coull-style adjusted estimates and a shift term::

    z   = Φ⁻¹(1 − α/2)
    p'  = (n·p_obs + z²/2) / (n + z²),    n'  = n + z²
    Se' = (m₁·TPR + 1) / (m₁ + 2),        m₁' = m₁ + 2
    Sp' = (m₀·TNR + 1) / (m₀ + 2),        m₀' = m₀ + 2
    θ'  = (p' + Sp' − 1) / (Se' + Sp' − 1)
    dθ  = 2z² · [θ'·Se'(1 − Se')/m₁' − (1 − θ')·Sp'(1 − Sp')/m₀']
    Var = [p'(1 − p')/n' + θ'²·Se'(1 − Se')/m₁' + (1 − θ')²·Sp'(1 − Sp')/m₀'] / (Se' + Sp' − 1)²
    CI  = θ' + dθ ± z·√Var,  clipped to [0, 1]

Lang & Reiczigel report by simulation that it keeps close to the nominal coverage for samples as small as 30,
where the plain Rogan–Gladen Wald interval does not. The same interval is what M. P. Fay's R package ``asht``
computes (``prevSeSp``) and what Lee et al. (2025) recommend for LLM judges (their reference code,
``llm_judge_reporting.calibration.confidence_interval``, is this formula with "correct" as the positive class).
The adjusted denominator Se' + Sp' − 1 ≤ 0 leaves the interval undefined (None with the reason).

When the judged runs are the calibration runs themselves, θ̂ equals the reference's failure rate exactly
(p_obs = θ·TPR + (1 − θ)(1 − TNR) holds in-sample) and the interval, which assumes independent samples, is
only indicative: correct the judge's failure rate on *other* runs (``observed``) for a real estimate.

References:

* J. Cohen (1960), A coefficient of agreement for nominal scales. Educ. Psychol. Meas. 20(1):37–46.
* E. B. Wilson (1927), Probable inference, the law of succession, and statistical inference. JASA 22:209–212.
* R. G. Newcombe (1998), Two-sided confidence intervals for the single proportion: comparison of seven methods.
  Stat. Med. 17:857–872.
* W. J. Rogan, B. Gladen (1978), Estimating prevalence from the results of a screening test. Am. J. Epidemiol.
  107(1):71–76.
* Z. Lang, J. Reiczigel (2014), Confidence limits for prevalence of disease adjusted for estimated sensitivity
  and specificity. Prev. Vet. Med. 113(1):13–22, doi:10.1016/j.prevetmed.2013.09.015.
* C. Lee, T. Zeng, J. Jeong, J. Sohn, K. Lee (2025), How to Correctly Report LLM-as-a-Judge Evaluations.
  arXiv:2511.21140.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Final, Literal, TypeAlias

__all__ = [
    "INTERVAL_METHOD",
    "Calibration",
    "Confusion",
    "Estimate",
    "Interval",
    "Observed",
    "Verdict",
    "calibrate",
    "cohens_kappa",
    "corrected_failure_rate",
    "rogan_gladen",
    "tally",
    "wilson",
    "z_value",
]

Verdict: TypeAlias = Literal["pass", "fail", "error", "not_applicable"]
"""One side of a pair: a human label or a scorer's outcome (``fail`` is the positive class)."""

INTERVAL_METHOD: Final = "lang-reiczigel-2014"
"""The name of the corrected-rate interval method, recorded in reports."""

WILSON: Final = "wilson"


@dataclass(frozen=True, slots=True)
class Interval:
    """A two-sided confidence interval at ``confidence`` (0.95 = 95 %)."""

    low: float
    high: float
    confidence: float
    method: str

    def to_json(self) -> dict[str, Any]:
        return {"low": self.low, "high": self.high, "confidence": self.confidence, "method": self.method}


@dataclass(frozen=True, slots=True)
class Estimate:
    """A measure: ``value`` with its ``interval`` when it has one; ``value`` None when undefined, and then
    ``reason`` says why (``reason`` may also explain a missing interval)."""

    value: float | None
    interval: Interval | None = None
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "interval": None if self.interval is None else self.interval.to_json(),
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class Confusion:
    """Counts of compared pairs (``fail`` is positive) and of the pairs left out."""

    tp: int = 0
    fp: int = 0
    tn: int = 0
    fn: int = 0
    judge_errors: int = 0
    """Pairs whose judge verdict was an error (API unavailable, invalid output): excluded."""
    judge_not_applicable: int = 0
    """Pairs whose judge was not applicable (its inputs were missing): excluded."""
    reference_missing: int = 0
    """Pairs whose reference gave no pass/fail (a code scorer's error or not_applicable): excluded."""

    def __post_init__(self) -> None:
        for name in ("tp", "fp", "tn", "fn", "judge_errors", "judge_not_applicable", "reference_missing"):
            if getattr(self, name) < 0:
                raise ValueError(f"Confusion.{name} must not be negative")

    @property
    def n(self) -> int:
        """Compared pairs."""
        return self.tp + self.fp + self.tn + self.fn

    @property
    def excluded(self) -> int:
        return self.judge_errors + self.judge_not_applicable + self.reference_missing

    @property
    def reference_failures(self) -> int:
        """m₁: compared runs the reference says failed."""
        return self.tp + self.fn

    @property
    def reference_passes(self) -> int:
        """m₀: compared runs the reference says passed."""
        return self.tn + self.fp

    @property
    def judged_failures(self) -> int:
        """Compared runs the judge says failed."""
        return self.tp + self.fp

    def to_json(self) -> dict[str, int]:
        return {
            "n": self.n,
            "tp": self.tp,
            "fp": self.fp,
            "tn": self.tn,
            "fn": self.fn,
            "judge_errors": self.judge_errors,
            "judge_not_applicable": self.judge_not_applicable,
            "reference_missing": self.reference_missing,
        }


def tally(pairs: Iterable[tuple[Verdict, Verdict]]) -> Confusion:
    """The confusion counts of ``(reference, judge)`` pairs. A judge ``error`` or ``not_applicable`` is
    counted as such (whatever the reference); otherwise a reference that is neither ``pass`` nor ``fail`` is
    ``reference_missing``. Any other value raises :class:`ValueError`."""
    counts = {"tp": 0, "fp": 0, "tn": 0, "fn": 0, "judge_errors": 0, "judge_not_applicable": 0, "reference_missing": 0}
    allowed = ("pass", "fail", "error", "not_applicable")
    for reference, judge in pairs:
        if reference not in allowed or judge not in allowed:
            raise ValueError(f"a verdict is one of {allowed}, got ({reference!r}, {judge!r})")
        if judge == "error":
            counts["judge_errors"] += 1
        elif judge == "not_applicable":
            counts["judge_not_applicable"] += 1
        elif reference not in ("pass", "fail"):
            counts["reference_missing"] += 1
        elif reference == "fail":
            counts["tp" if judge == "fail" else "fn"] += 1
        else:
            counts["fp" if judge == "fail" else "tn"] += 1
    return Confusion(**counts)


def z_value(confidence: float) -> float:
    """The two-sided standard normal quantile Φ⁻¹(1 − α/2) of ``confidence`` = 1 − α."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    return NormalDist().inv_cdf(1.0 - (1.0 - confidence) / 2.0)


def _clip(x: float) -> float:
    return min(1.0, max(0.0, x))


def wilson(successes: int, n: int, confidence: float = 0.95) -> Interval | None:
    """The Wilson score interval of ``successes`` out of ``n`` (None when ``n`` is 0)::

    (p + z²/2n ± z·√(p(1−p)/n + z²/4n²)) / (1 + z²/n)
    """
    if not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n, got {successes} of {n}")
    if n == 0:
        return None
    z = z_value(confidence)
    p = successes / n
    z2 = z * z
    denominator = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denominator
    half = z * math.sqrt(p * (1.0 - p) / n + z2 / (4 * n * n)) / denominator
    low = 0.0 if successes == 0 else _clip(centre - half)  # exact endpoints (no rounding residue) at 0 and n
    high = 1.0 if successes == n else _clip(centre + half)
    return Interval(low, high, confidence, WILSON)


def _proportion(successes: int, n: int, confidence: float, undefined: str) -> Estimate:
    if n == 0:
        return Estimate(None, None, undefined)
    return Estimate(successes / n, wilson(successes, n, confidence))


def cohens_kappa(c: Confusion) -> Estimate:
    """Cohen's kappa of the compared pairs (no interval). Undefined without pairs, and when chance agreement
    is 1 (both sides gave the same single verdict to every run: agreement beyond chance cannot be measured)."""
    n = c.n
    if n == 0:
        return Estimate(None, None, "no compared runs")
    observed = (c.tp + c.tn) / n
    chance = (c.judged_failures * c.reference_failures + (c.fn + c.tn) * c.reference_passes) / (n * n)
    if chance >= 1.0:
        return Estimate(
            None, None, "the judge and the reference gave one same verdict to every run: chance agreement is 1"
        )
    return Estimate((observed - chance) / (1.0 - chance))


def rogan_gladen(p_obs: float, tpr: float, tnr: float) -> float | None:
    """(p_obs + TNR − 1) / (TPR + TNR − 1) clipped to [0, 1]; None when TPR + TNR − 1 ≤ 0."""
    for name, value in (("p_obs", p_obs), ("tpr", tpr), ("tnr", tnr)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {value}")
    youden = tpr + tnr - 1.0
    if youden <= 0.0:
        return None
    return _clip((p_obs + tnr - 1.0) / youden)


@dataclass(frozen=True, slots=True)
class Observed:
    """The judge's failure count on a set of runs (``source``: ``calibration`` = the compared runs
    themselves, ``given`` = counts supplied by the caller, e.g. from production)."""

    failures: int
    n: int
    source: str = "calibration"

    def __post_init__(self) -> None:
        if not 0 <= self.failures <= self.n:
            raise ValueError(f"need 0 <= failures <= n, got {self.failures} of {self.n}")

    @property
    def rate(self) -> float | None:
        return None if self.n == 0 else self.failures / self.n

    def to_json(self) -> dict[str, Any]:
        return {"failures": self.failures, "n": self.n, "rate": self.rate, "source": self.source}


def corrected_failure_rate(observed: Observed, c: Confusion, confidence: float = 0.95) -> Estimate:
    """The failure rate of the ``observed`` runs corrected for the judge's TPR and TNR measured in ``c``
    (Rogan–Gladen), with the Lang–Reiczigel interval (module docstring). None with the reason when the
    correction is undefined; the interval alone may be None (its reason given) when only it is undefined."""
    m1, m0 = c.reference_failures, c.reference_passes
    if observed.n == 0:
        return Estimate(None, None, "no judged runs to correct")
    if m1 == 0:
        return Estimate(None, None, "TPR cannot be measured: no run the reference says failed")
    if m0 == 0:
        return Estimate(None, None, "TNR cannot be measured: no run the reference says passed")
    p, tpr, tnr = observed.failures / observed.n, c.tp / m1, c.tn / m0
    youden = tpr + tnr - 1.0
    point = rogan_gladen(p, tpr, tnr)
    if point is None:
        return Estimate(
            None,
            None,
            f"undefined: TPR + TNR − 1 = {youden:.3f} ≤ 0, the judge is no better than chance "
            "(its verdicts carry no information on the failure rate)",
        )
    z = z_value(confidence)
    z2 = z * z
    n_, m1_, m0_ = observed.n + z2, m1 + 2, m0 + 2
    p_ = (observed.n * p + z2 / 2) / n_
    se_ = (m1 * tpr + 1) / m1_
    sp_ = (m0 * tnr + 1) / m0_
    adjusted = se_ + sp_ - 1.0
    if adjusted <= 0.0:
        return Estimate(point, None, "no interval: the adjusted TPR + TNR − 1 is not positive")
    theta_ = (p_ + sp_ - 1.0) / adjusted
    var_se, var_sp = se_ * (1.0 - se_) / m1_, sp_ * (1.0 - sp_) / m0_
    shift = 2.0 * z2 * (theta_ * var_se - (1.0 - theta_) * var_sp)
    variance = (p_ * (1.0 - p_) / n_ + theta_**2 * var_se + (1.0 - theta_) ** 2 * var_sp) / adjusted**2
    half = z * math.sqrt(variance)
    centre = theta_ + shift
    return Estimate(point, Interval(_clip(centre - half), _clip(centre + half), confidence, INTERVAL_METHOD))


@dataclass(frozen=True, slots=True)
class Calibration:
    """Every measure of one judge against one reference (see the module docstring)."""

    confusion: Confusion
    accuracy: Estimate
    tpr: Estimate
    tnr: Estimate
    youden_j: float | None
    kappa: Estimate
    observed: Observed
    corrected: Estimate
    confidence: float

    def to_json(self) -> dict[str, Any]:
        return {
            "counts": self.confusion.to_json(),
            "accuracy": self.accuracy.to_json(),
            "tpr": self.tpr.to_json(),
            "tnr": self.tnr.to_json(),
            "youden_j": self.youden_j,
            "kappa": self.kappa.to_json(),
            "observed_failure_rate": self.observed.to_json(),
            "corrected_failure_rate": self.corrected.to_json(),
            "confidence": self.confidence,
        }


def calibrate(
    pairs: Iterable[tuple[Verdict, Verdict]] | Confusion,
    *,
    observed: Observed | None = None,
    confidence: float = 0.95,
) -> Calibration:
    """The measures of ``(reference, judge)`` pairs (or of their counts). ``observed``: the judge's failure
    count on the runs whose failure rate is to be corrected; default the compared runs themselves."""
    z_value(confidence)  # validates it
    c = pairs if isinstance(pairs, Confusion) else tally(pairs)
    tpr = _proportion(c.tp, c.reference_failures, confidence, "no run the reference says failed")
    tnr = _proportion(c.tn, c.reference_passes, confidence, "no run the reference says passed")
    youden = None if tpr.value is None or tnr.value is None else tpr.value + tnr.value - 1.0
    seen = observed if observed is not None else Observed(c.judged_failures, c.n, "calibration")
    return Calibration(
        confusion=c,
        accuracy=_proportion(c.tp + c.tn, c.n, confidence, "no compared runs"),
        tpr=tpr,
        tnr=tnr,
        youden_j=youden,
        kappa=cohens_kappa(c),
        observed=seen,
        corrected=corrected_failure_rate(seen, c, confidence),
        confidence=confidence,
    )
