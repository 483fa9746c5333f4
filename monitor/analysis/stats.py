"""When is a change of a rate more than noise: two-sided tests of two independent proportions.

A pattern hurt ``x1`` of ``n1`` runs this window and ``x0`` of ``n0`` the window before. :func:`compare` tests
H0: both windows have the same rate, and says which test it used:

* the pooled two-proportion z-test (score test) when every expected cell count of the 2×2 table is at least 5
  (Cochran's rule): ``z = (p1 - p0) / sqrt(p (1 - p) (1/n1 + 1/n0))`` with ``p = (x1 + x0) / (n1 + n0)``,
  two-sided ``P = erfc(|z| / sqrt(2))`` — Agresti, *Categorical Data Analysis*, 3rd ed. (2013), §3.1.3 and
  Fleiss, Levin & Paik, *Statistical Methods for Rates and Proportions*, 3rd ed. (2003), §2.5 (it equals
  Pearson's chi-squared test of the table without continuity correction);
* otherwise Fisher's exact test (Fisher 1935; Agresti 2013 §3.5.1): conditional on the margins, the count of the
  first cell is hypergeometric; the two-sided P-value sums the probabilities of every table no more likely than
  the observed one, with R's ``fisher.test`` relative tolerance of 1e-7 for ties.

No SciPy: both are a few lines on :mod:`math` (``lgamma``, ``erfc``), checked in the tests against exact rational
arithmetic and textbook examples.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

__all__ = ["Comparison", "compare", "fisher_exact", "two_proportion_z"]

TestName = Literal["z", "fisher"]


@dataclass(frozen=True, slots=True)
class Comparison:
    """Two rates compared. ``p_value`` is None when a window has no trials (nothing to compare)."""

    rate: float | None
    previous_rate: float | None
    change: float | None
    """``rate - previous_rate`` in proportion points (0.05 = five percentage points)."""
    p_value: float | None
    test: TestName | None
    significant: bool


def two_proportion_z(x1: int, n1: int, x0: int, n0: int) -> float:
    """Two-sided P-value of the pooled two-proportion z-test (1.0 when both rates are 0 or both 1)."""
    _check(x1, n1, x0, n0)
    pooled = (x1 + x0) / (n1 + n0)
    variance = pooled * (1 - pooled) * (1 / n1 + 1 / n0)
    if variance <= 0:
        return 1.0
    z = (x1 / n1 - x0 / n0) / math.sqrt(variance)
    return min(1.0, math.erfc(abs(z) / math.sqrt(2)))


def _log_choose(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def fisher_exact(a: int, b: int, c: int, d: int) -> float:
    """Two-sided P-value of Fisher's exact test of the table ``[[a, b], [c, d]]``."""
    for v in (a, b, c, d):
        if v < 0:
            raise ValueError("counts must be >= 0")
    row1, col1, total = a + b, a + c, a + b + c + d
    if total == 0:
        return 1.0
    low, high = max(0, col1 - (total - row1)), min(row1, col1)
    denominator = _log_choose(total, col1)

    def log_p(x: int) -> float:
        return _log_choose(row1, x) + _log_choose(total - row1, col1 - x) - denominator

    observed = log_p(a)
    cutoff = observed + math.log1p(1e-7)
    p = math.fsum(math.exp(lp) for x in range(low, high + 1) if (lp := log_p(x)) <= cutoff)
    return min(1.0, p)


def _check(x1: int, n1: int, x0: int, n0: int) -> None:
    if n1 <= 0 or n0 <= 0:
        raise ValueError("each window needs at least one trial")
    if not (0 <= x1 <= n1 and 0 <= x0 <= n0):
        raise ValueError("successes must lie in [0, trials]")


def compare(x1: int, n1: int, x0: int, n0: int, alpha: float) -> Comparison:
    """``x1``/``n1`` (this window) against ``x0``/``n0`` (the previous one) at level ``alpha``.

    Counts above their trials are clipped (a run counted in a pattern while its denominator missed it, at a
    window's edge); a window without trials gives no test.
    """
    x1, x0 = max(0, min(x1, n1)), max(0, min(x0, n0))
    rate = x1 / n1 if n1 > 0 else None
    previous = x0 / n0 if n0 > 0 else None
    if rate is None or previous is None:
        return Comparison(rate, previous, None, None, None, False)
    expected_min = min(
        (x1 + x0) * n1 / (n1 + n0),
        (x1 + x0) * n0 / (n1 + n0),
        (n1 + n0 - x1 - x0) * n1 / (n1 + n0),
        (n1 + n0 - x1 - x0) * n0 / (n1 + n0),
    )
    if expected_min >= 5:
        p, test = two_proportion_z(x1, n1, x0, n0), "z"
    else:
        p, test = fisher_exact(x1, n1 - x1, x0, n0 - x0), "fisher"
    return Comparison(rate, previous, rate - previous, p, test, p < alpha)  # type: ignore[arg-type]
