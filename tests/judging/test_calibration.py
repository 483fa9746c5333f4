"""``monitor.judging.calibration`` against values worked by hand or printed in the literature.

Sources of the expected numbers:

* Cohen's kappa: the 2×2 example of the Wikipedia article "Cohen's kappa" (κ = 0.4); the kappa-paradox tables of
  Feinstein & Cicchetti (1990) as reproduced in B. Gerstman, *Epidemiology Kept Simple*, Table 10.6 (κ = 0.70 and
  0.32 at the same 85 % agreement) and its X-ray example 10.1 (κ = 0.524); the two-doctor example of
  easycalculation.com's Cohen's kappa page (κ = 0.21).
* Wilson intervals: Newcombe (1998), Stat. Med. 17:857–872, Table II, method 3 (81/263, 15/148, 0/20, 1/29).
* Rogan–Gladen: worked by hand below.
* Lang–Reiczigel interval: the example of the README of Lee et al.'s reference code (UW-Madison-Lee-Lab/
  LLM-judge-reporting, ``confidence_interval(p=0.4, q0=0.7, q1=0.9, n=1000, m0=200, m1=200)``), whose output
  was computed with that code, and the intermediate values worked by hand.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from monitor.judging.calibration import (
    INTERVAL_METHOD,
    Confusion,
    Observed,
    calibrate,
    cohens_kappa,
    corrected_failure_rate,
    rogan_gladen,
    tally,
    wilson,
    z_value,
)


def table(a: int, b: int, c: int, d: int) -> Confusion:
    """A 2×2 agreement table [[a, b], [c, d]] with rater 1 in rows (yes, no) and rater 2 in columns: the
    reference is the judge's column here (kappa is symmetric, so the orientation does not matter)."""
    return Confusion(tp=a, fp=c, fn=b, tn=d)


# ----------------------------------------------------------------------------- Cohen's kappa


@pytest.mark.parametrize(
    ("cells", "expected", "places"),
    [
        ((20, 5, 10, 15), 0.4, 12),  # Wikipedia: p_o = 0.7, p_e = 0.5
        ((40, 9, 6, 45), 0.70, 2),  # Feinstein & Cicchetti 1990, table A: p_o = 0.85, p_e = 0.50
        ((80, 10, 5, 5), 0.32, 2),  # table B: the same p_o = 0.85, p_e = 0.78 → the "paradox"
        ((1467, 782, 1309, 16232), 0.524, 3),  # Epidemiology Kept Simple, example 10.1
        ((12, 2, 4, 2), 0.21, 2),  # easycalculation.com: p_o = 0.7, p_e = 0.62
    ],
)
def test_kappa_matches_published_examples(cells: tuple[int, int, int, int], expected: float, places: int) -> None:
    kappa = cohens_kappa(table(*cells))
    assert kappa.value is not None and kappa.reason is None
    assert round(kappa.value, places) == expected


def test_kappa_by_hand() -> None:
    # TP 20, FN 3, FP 2, TN 21 (n = 46): p_o = 41/46; judge says fail 22 times, reference 23 times:
    # p_e = (22·23 + 24·23) / 46² = 1058 / 2116 = 1/2, so κ = (41/46 − 1/2) / (1/2) = 36/46.
    assert cohens_kappa(Confusion(tp=20, fn=3, fp=2, tn=21)).value == pytest.approx(36 / 46, abs=1e-15)
    # perfect disagreement on a balanced set is −1
    assert cohens_kappa(Confusion(fp=5, fn=5)).value == pytest.approx(-1.0)


def test_kappa_is_undefined_without_chance_disagreement() -> None:
    every_run_passes = cohens_kappa(Confusion(tn=12))
    assert every_run_passes.value is None and "chance agreement is 1" in (every_run_passes.reason or "")
    assert cohens_kappa(Confusion()).value is None
    # one side constant, the other not: defined and 0 (no agreement beyond chance)
    assert cohens_kappa(Confusion(tn=7, fp=3)).value == pytest.approx(0.0)


# ----------------------------------------------------------------------------- Wilson


@pytest.mark.parametrize(
    ("k", "n", "low", "high"),
    [(81, 263, 0.2553, 0.3662), (15, 148, 0.0624, 0.1605), (0, 20, 0.0, 0.1611), (1, 29, 0.0061, 0.1718)],
)
def test_wilson_matches_newcombe_1998(k: int, n: int, low: float, high: float) -> None:
    interval = wilson(k, n)
    assert interval is not None
    assert (round(interval.low, 4), round(interval.high, 4)) == (low, high)
    assert interval.method == "wilson" and interval.confidence == 0.95


def test_wilson_edge_cases() -> None:
    assert wilson(0, 0) is None
    full = wilson(20, 20)
    assert full is not None and full.high == 1.0 and full.low == pytest.approx(1 - 0.1611, abs=1e-4)
    with pytest.raises(ValueError):
        wilson(3, 2)
    assert z_value(0.95) == pytest.approx(1.959963984540054)
    assert z_value(0.90) == pytest.approx(1.6448536269514722)
    with pytest.raises(ValueError):
        z_value(1.0)


# ----------------------------------------------------------------------------- counting pairs


def test_tally_counts_and_exclusions() -> None:
    pairs = [
        ("fail", "fail"),
        ("fail", "fail"),
        ("fail", "pass"),
        ("pass", "fail"),
        ("pass", "pass"),
        ("pass", "pass"),
        ("pass", "pass"),
        ("fail", "error"),
        ("pass", "not_applicable"),
        ("not_applicable", "pass"),
        ("error", "error"),  # a judge error counts as a judge error whatever the reference
    ]
    c = tally(pairs)  # type: ignore[arg-type]
    assert (c.tp, c.fn, c.fp, c.tn) == (2, 1, 1, 3)
    assert (c.judge_errors, c.judge_not_applicable, c.reference_missing) == (2, 1, 1)
    assert (c.n, c.excluded, c.reference_failures, c.reference_passes, c.judged_failures) == (7, 4, 3, 4, 3)
    with pytest.raises(ValueError, match="verdict"):
        tally([("fail", "maybe")])  # type: ignore[list-item]


def test_measures_of_a_small_table() -> None:
    m = calibrate(Confusion(tp=8, fn=2, fp=3, tn=7))
    assert m.accuracy.value == 0.75 and m.tpr.value == 0.8 and m.tnr.value == 0.7
    assert m.youden_j == pytest.approx(0.5)
    assert m.tpr.interval == wilson(8, 10) and m.accuracy.interval == wilson(15, 20)
    # p_e = (11·10 + 9·10)/400 = 0.5 → κ = (0.75 − 0.5)/0.5
    assert m.kappa.value == pytest.approx(0.5)
    assert (m.observed.failures, m.observed.n, m.observed.source) == (11, 20, "calibration")
    doc = m.to_json()
    assert doc["counts"] == {
        "n": 20,
        "tp": 8,
        "fp": 3,
        "tn": 7,
        "fn": 2,
        "judge_errors": 0,
        "judge_not_applicable": 0,
        "reference_missing": 0,
    }
    assert doc["corrected_failure_rate"]["interval"]["method"] == INTERVAL_METHOD


# ----------------------------------------------------------------------------- Rogan–Gladen


def test_rogan_gladen_by_hand() -> None:
    # (0.4 + 0.7 − 1) / (0.9 + 0.7 − 1) = 0.1 / 0.6
    assert rogan_gladen(0.4, tpr=0.9, tnr=0.7) == pytest.approx(1 / 6)
    # a perfect judge needs no correction
    assert rogan_gladen(0.23, tpr=1.0, tnr=1.0) == pytest.approx(0.23)
    # fewer flags than its false-positive rate alone would give: clipped to 0; more than TPR: clipped to 1
    assert rogan_gladen(0.2, tpr=0.9, tnr=0.7) == 0.0
    assert rogan_gladen(0.95, tpr=0.9, tnr=0.7) == 1.0


def test_rogan_gladen_is_undefined_for_a_judge_no_better_than_chance() -> None:
    assert rogan_gladen(0.5, tpr=0.5, tnr=0.5) is None  # J = 0: never divides by zero
    assert rogan_gladen(0.5, tpr=0.3, tnr=0.4) is None  # J < 0
    corrected = corrected_failure_rate(Observed(50, 100), Confusion(tp=5, fn=5, fp=5, tn=5))
    assert corrected.value is None and corrected.interval is None
    assert corrected.reason is not None and "TPR + TNR − 1 = 0.000 ≤ 0" in corrected.reason


def test_correction_needs_both_kinds_of_reference_runs() -> None:
    no_failures = corrected_failure_rate(Observed(3, 10), Confusion(tn=8, fp=2))
    assert no_failures.value is None and "TPR cannot be measured" in (no_failures.reason or "")
    no_passes = corrected_failure_rate(Observed(3, 10), Confusion(tp=8, fn=2))
    assert no_passes.value is None and "TNR cannot be measured" in (no_passes.reason or "")
    nothing_judged = corrected_failure_rate(Observed(0, 0), Confusion(tp=8, fn=2, tn=3))
    assert nothing_judged.value is None and nothing_judged.reason == "no judged runs to correct"
    m = calibrate(Confusion(tn=8, fp=2))
    assert m.tpr.value is None and m.youden_j is None and m.corrected.value is None


def test_lang_reiczigel_interval_of_the_reference_code_example() -> None:
    # p_obs = 0.4 of n = 1000; TNR q0 = 0.7 on m0 = 200 passing runs; TPR q1 = 0.9 on m1 = 200 failed runs.
    c = Confusion(tp=180, fn=20, tn=140, fp=60)
    estimate = corrected_failure_rate(Observed(400, 1000, "given"), c)
    assert estimate.value == pytest.approx(1 / 6)
    assert estimate.interval is not None and estimate.interval.method == "lang-reiczigel-2014"
    # the output of the authors' confidence_interval(0.4, 0.7, 0.9, 1000, 200, 200)
    assert estimate.interval.low == pytest.approx(0.05635072484160897, abs=1e-12)
    assert estimate.interval.high == pytest.approx(0.26273302578595875, abs=1e-12)
    # by hand: z² = 3.841459, n' = 1003.841459, p' = (400 + z²/2)/n' = 0.400383, Se' = 181/202 = 0.896040,
    # Sp' = 141/202 = 0.698020, θ' = (p' + Sp' − 1)/(Se' + Sp' − 1) = 0.165644,
    # dθ = 2z²[θ'·Se'(1 − Se')/202 − (1 − θ')·Sp'(1 − Sp')/202] = −0.006102,
    # Var = [p'(1 − p')/n' + θ'²·Se'(1 − Se')/202 + (1 − θ')²·Sp'(1 − Sp')/202]/(Se' + Sp' − 1)² = 0.0027720,
    # so the interval is 0.159542 ± 1.959964·√0.0027720 = 0.159542 ± 0.103191.
    z2 = z_value(0.95) ** 2
    assert z2 == pytest.approx(3.841459, abs=1e-6)
    centre = (estimate.interval.low + estimate.interval.high) / 2
    assert centre == pytest.approx(0.165644 - 0.006102, abs=2e-6)
    assert (estimate.interval.high - estimate.interval.low) / 2 == pytest.approx(0.103191, abs=2e-6)
    assert math.sqrt(z2 * 0.0027720) == pytest.approx(0.103191, abs=1e-5)


def test_corrected_rate_of_the_calibration_runs_is_the_labelled_rate() -> None:
    # in-sample, p_obs = θ·TPR + (1 − θ)(1 − TNR) exactly, so Rogan–Gladen gives back the reference's rate
    m = calibrate(Confusion(tp=20, fn=3, fp=2, tn=21))
    assert m.observed.rate == pytest.approx(22 / 46)
    assert m.corrected.value == pytest.approx(23 / 46)
    assert m.corrected.interval is not None
    assert m.corrected.interval.low < 23 / 46 < m.corrected.interval.high


def test_a_narrower_confidence_gives_a_narrower_interval() -> None:
    c = Confusion(tp=18, fn=4, fp=2, tn=20)
    wide = corrected_failure_rate(Observed(300, 1000, "given"), c, 0.99).interval
    narrow = corrected_failure_rate(Observed(300, 1000, "given"), c, 0.80).interval
    assert wide is not None and narrow is not None
    assert wide.low < narrow.low and narrow.high < wide.high
    with pytest.raises(ValueError):
        calibrate(c, confidence=0.0)


counts = st.integers(min_value=0, max_value=60)


@given(counts, counts, counts, counts, st.integers(min_value=1, max_value=5000), st.data())
def test_measures_stay_in_range(tp: int, fp: int, tn: int, fn: int, n: int, data: st.DataObject) -> None:
    failures = data.draw(st.integers(min_value=0, max_value=n))
    m = calibrate(Confusion(tp=tp, fp=fp, tn=tn, fn=fn), observed=Observed(failures, n, "given"))
    for e in (m.accuracy, m.tpr, m.tnr):
        assert (e.value is None) == (e.interval is None)
        if e.value is not None and e.interval is not None:
            assert 0.0 <= e.interval.low <= e.value <= e.interval.high <= 1.0
    if m.kappa.value is not None:
        assert -1.0 - 1e-12 <= m.kappa.value <= 1.0 + 1e-12
    if m.corrected.value is not None:
        assert 0.0 <= m.corrected.value <= 1.0
        assert m.youden_j is not None and m.youden_j > 0
        if m.corrected.interval is not None:
            assert 0.0 <= m.corrected.interval.low <= m.corrected.interval.high <= 1.0
    else:
        assert m.corrected.reason
