"""Conformance tests for ``adk_response_match`` (SCORING.md §2.9; rouge-score 0.1.2, ADK 2.13.0 tokenizer)."""

from __future__ import annotations

import pytest

from monitor.scoring.expectation import Expectation
from monitor.scoring.reference.adk_response_match import AdkResponseMatch, AdkUnicodeTokenizer, rouge1
from tests.scoring.builders import run_with_calls


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("สวัสดีครับ", ["ส", "วั", "ส", "ดี", "ค", "รั", "บ"]),
        ("ราคา100บาท", ["ร", "า", "ค", "า100", "บ", "า", "ท"]),
        ("ทำ", ["ทํ", "า"]),
        ("Temperature: 21°C", ["temperatur", "21", "c"]),
        ("Zürich", ["zürich"]),
        ("Straße STRASSE", ["straße", "strass"]),
        ("ＡＢＣ", ["abc"]),
    ],
)
def test_adk_tokenizer(text: str, tokens: list[str]) -> None:
    assert AdkUnicodeTokenizer().tokenize(text) == tokens


@pytest.mark.parametrize("tokenizer", ["adk", "rouge_score"])
def test_ascii_example(tokenizer: str) -> None:
    p, r, f = rouge1("I have set the device_2 status to off.", "The device_2 status is now OFF.", tokenizer)
    assert (p, r) == (5 / 7, 5 / 9)
    assert f == 2 * p * r / (p + r)
    assert round(f, 3) == 0.625


def test_cjk_example() -> None:
    assert round(rouge1("我從骰子擲出了 4 和 7", "我擲出了 4 和 7", "adk")[2], 4) == 0.8235
    assert rouge1("我從骰子擲出了 4 和 7", "我擲出了 4 和 7", "rouge_score")[2] == 1.0


def test_rouge_score_tokenizer_drops_non_ascii() -> None:
    assert rouge1("Zürich", "z rich", "rouge_score")[2] == 1.0


def test_empty_texts_score_zero_and_mean_over_turns() -> None:
    s = AdkResponseMatch()
    r = s.score(run_with_calls([], final_response=""), Expectation(expected_response=""))
    assert r.score == 0.0 and r.passed is False
    t1 = (run_with_calls([], final_response="hello world"), Expectation(expected_response="hello world"))
    t2 = (run_with_calls([], final_response="bye"), Expectation(expected_response="hello"))
    agg = s.score_turns([t1, t2])
    assert agg.score == 0.5
    assert s.score(run_with_calls([]), None).reason == "no_reference"
