"""CardinalityGuard: known names, top N by decayed frequency, 'other', eviction, bounds, threads."""

from __future__ import annotations

import threading

import pytest

from monitor.export.cardinality import OTHER, UNKNOWN, CappedLabel, CardinalityGuard


def test_known_names_always_kept_and_not_counted() -> None:
    g = CardinalityGuard(known=["search", "fetch"], top_n=0)
    assert g.label("search") == "search"
    assert g.label("fetch") == "fetch"
    assert g.label("weather") == OTHER
    assert g.count("search") == 0
    assert g.admitted == frozenset()


def test_missing_name_is_unknown() -> None:
    g = CardinalityGuard(top_n=2)
    assert g.label(None) == UNKNOWN
    assert g.label("") == UNKNOWN
    assert g.admitted == frozenset()


def test_first_names_fill_the_free_slots_then_fold_into_other() -> None:
    g = CardinalityGuard(top_n=2)
    assert [g.label(n) for n in ("a", "b", "c", "a", "c")] == ["a", "b", OTHER, "a", OTHER]
    assert g.admitted == {"a", "b"}
    assert g.folded == 2


def test_a_frequent_name_replaces_the_least_frequent_admitted_one_with_hysteresis() -> None:
    evicted: list[str] = []
    g = CardinalityGuard(top_n=2, on_evict=evicted.append, hysteresis=2.0)
    for _ in range(10):
        g.label("a")
    g.label("b")  # b: 1
    g.label("c")  # c: 1 (not > 2 x 1)
    assert g.label("c") == OTHER  # c: 2, still not > 2 x b(1)
    assert g.label("c") == "c"  # c: 3 > 2 -> replaces b
    assert evicted == ["b"]
    assert g.admitted == {"a", "c"}
    assert g.label("b") == OTHER  # b: 2, c: 3 -> stays out (no flapping)
    assert g.peek("a") == "a" and g.peek("b") == OTHER and g.peek("search") == OTHER


def test_top_n_follows_recent_traffic_through_decay() -> None:
    g = CardinalityGuard(top_n=1, half_life=100)
    for _ in range(1000):
        g.label("old")
    assert g.admitted == {"old"}
    # "old" stops; "new" takes over once old's decayed count falls below half of new's
    labels = [g.label("new") for _ in range(2000)]
    assert labels[0] == OTHER
    assert labels[-1] == "new"
    assert g.admitted == {"new"}
    assert g.count("old") < 1


def test_counting_memory_is_bounded_under_a_flood_of_unique_names() -> None:
    g = CardinalityGuard(top_n=3, capacity=64)
    for i in range(10_000):
        g.label(f"hallucinated_{i}")
        g.label("real")
    assert g.table_size <= 64
    assert g.peek("real") == "real"
    assert len(g.admitted) <= 3


def test_very_long_names_fold_into_other() -> None:
    g = CardinalityGuard(top_n=5)
    assert g.label("x" * 500) == OTHER
    assert g.admitted == frozenset()


def test_thread_safety_keeps_the_bound() -> None:
    g = CardinalityGuard(top_n=5, half_life=50)
    seen: set[str] = set()
    lock = threading.Lock()

    def work(k: int) -> None:
        local = {g.label(f"n{(k * 7 + i) % 40}") for i in range(5000)}
        with lock:
            seen.update(local)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(g.admitted) <= 5
    assert OTHER in seen


@pytest.mark.parametrize("bad", [{"top_n": -1}, {"half_life": 0}, {"hysteresis": 0.5}])
def test_invalid_parameters(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        CardinalityGuard(**bad)  # type: ignore[arg-type]


def test_capped_label_keeps_presets_and_the_first_values() -> None:
    cap = CappedLabel(preset=["new"], max_values=2)
    assert [cap(v) for v in ("new", "a", "b", "c", "a", "new", "")] == ["new", "a", "b", OTHER, "a", "new", UNKNOWN]


def test_names_the_exposition_cannot_encode_fold_into_other_and_metrics_still_render() -> None:
    """A lone surrogate reaching a label (decoding replaces them; this is the backstop) must not turn every
    later scrape into an error: it folds into ``other``."""
    from prometheus_client import CollectorRegistry, Counter, generate_latest

    guard, capped = CardinalityGuard(top_n=5), CappedLabel()
    bad = "agent-\ud800"
    assert guard.label(bad) == OTHER and capped(bad) == OTHER
    assert guard.label("agent-é") == "agent-é"  # non-ASCII but encodable stays
    registry = CollectorRegistry()
    counter = Counter("runs", "runs", ["agent"], registry=registry)
    counter.labels(guard.label(bad)).inc()
    assert b'runs_total{agent="other"} 1.0' in generate_latest(registry)
