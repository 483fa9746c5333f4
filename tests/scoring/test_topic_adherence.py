"""Conformance tests for ``ragas_topic_adherence`` (SCORING.md §2.10, ragas 0.4.3)."""

from __future__ import annotations

import pytest

from monitor.scoring.expectation import Expectation, TopicLabel
from monitor.scoring.reference.topic_adherence import RagasTopicAdherence
from monitor.scoring.result import FailureKind
from tests.scoring.builders import run_with_calls

LABELS = (
    TopicLabel("weather", answered=True, on_topic=True),
    TopicLabel("stocks", answered=True, on_topic=False),
    TopicLabel("forecast", answered=False, on_topic=True),
    TopicLabel("politics", answered=False, on_topic=False),
)


@pytest.mark.parametrize(
    ("mode", "want"),
    [
        ("precision", 1 / (2 + 1e-10)),
        ("recall", 1 / (2 + 1e-10)),
        ("f1", 2 * ((1 / (2 + 1e-10)) * (1 / (2 + 1e-10))) / (2 / (2 + 1e-10) + 1e-10)),
    ],
)
def test_modes(mode: str, want: float) -> None:
    r = RagasTopicAdherence({"mode": mode}).score(run_with_calls([]), Expectation(topic_labels=LABELS))
    assert r.score == want
    assert sorted(str(i.kind) for i in r.issues) == [FailureKind.OFF_TOPIC, FailureKind.OVER_REFUSAL]


def test_no_topics() -> None:
    assert RagasTopicAdherence().score(run_with_calls([]), Expectation()).reason == "no_topics"
    assert RagasTopicAdherence({"empty_score": 0.0}).score(run_with_calls([]), Expectation()).score == 0.0
