"""The significance tests against exact rational arithmetic and textbook values."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.analysis.stats import compare, fisher_exact, two_proportion_z


def _fisher_exact_rational(a: int, b: int, c: int, d: int) -> float:
    """Fisher's two-sided P with exact fractions (math.comb): the reference the float version must match."""
    row1, col1, n = a + b, a + c, a + b + c + d
    total = math.comb(n, col1)

    def p(x: int) -> Fraction:
        return Fraction(math.comb(row1, x) * math.comb(n - row1, col1 - x), total)

    observed = p(a)
    support = range(max(0, col1 - (n - row1)), min(row1, col1) + 1)
    return float(sum((p(x) for x in support if p(x) <= observed * Fraction(10_000_001, 10_000_000)), Fraction(0)))


def test_fisher_lady_tasting_tea() -> None:
    # Fisher (1935): 3 of 4 cups right each way; two-sided P = 34/70
    assert fisher_exact(3, 1, 1, 3) == pytest.approx(34 / 70, rel=1e-12)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 25), st.integers(0, 25), st.integers(0, 25), st.integers(0, 25))
def test_fisher_matches_exact_fractions(a: int, b: int, c: int, d: int) -> None:
    assert fisher_exact(a, b, c, d) == pytest.approx(_fisher_exact_rational(a, b, c, d), rel=1e-9, abs=1e-15)


def test_two_proportion_z_by_hand() -> None:
    # 60/1000 vs 40/1000: pooled p = 0.05, z = 0.02 / sqrt(0.05 * 0.95 * 0.002) = 2.05196, P = 0.040174
    # (= Pearson chi-squared 4.2105 with 1 df)
    assert two_proportion_z(60, 1000, 40, 1000) == pytest.approx(0.040174, abs=2e-6)
    assert two_proportion_z(0, 10, 0, 10) == 1.0


def test_compare_picks_the_test_and_says_when_a_change_is_noise() -> None:
    big = compare(120, 2000, 60, 2000, 0.05)
    assert big.test == "z" and big.significant and big.change == pytest.approx(0.03)
    small = compare(3, 20, 1, 25, 0.05)
    assert small.test == "fisher" and not small.significant
    noise = compare(51, 1000, 49, 1000, 0.05)
    assert not noise.significant and noise.p_value is not None and noise.p_value > 0.8
    assert compare(5, 10, 0, 0, 0.05).p_value is None
