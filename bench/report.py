"""The weekly report on a week of many runs: how long the queries, the analysis and the rendering take.

    .venv/bin/python bench/report.py [--runs 100000] [--postgres] [--keep DIR]

Synthetic rows (tests/report/synthetic.py: 4 code results per run, a judge result on 20% of runs, the failure mix
of the demo: confusions, missing parameters, tool errors, slow tools, skipped tools) are inserted straight into a
SQLite store (and, with ``--postgres``, into a throwaway PostgreSQL cluster, tests/support/postgres.py) for the
week 2026-W47, plus a fifth as many runs the week before (the week-over-week comparison has data).

Printed per backend: the insert time (not part of the report), then the report's three phases, each timed with
``time.perf_counter`` in this process:

* queries — every read of ``monitor report`` (both windows, definitions, scorers, score histogram, judge spend,
  example runs);
* analysis — patterns, confusions, trends and recommendations (pure Python);
* rendering — the document, HTML with its charts (matplotlib, warm: a first render pays ~1.5 s of font loading,
  shown separately), Markdown, and JSON validated against the schema;

and, as a baseline measured in the same run on the same rows, ``SELECT count(*)`` of the week's runs joined to
their results (the bare scan every report query must at least do): the ratio queries / baseline says how far the
report's queries are from a plain scan.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import sqlalchemy as sa  # noqa: E402

from monitor.analysis import DefinitionIndex, analyze, recommend  # noqa: E402
from monitor.report.document import ReportInputs, build  # noqa: E402
from monitor.report.render import render_html, render_json, render_markdown  # noqa: E402
from monitor.report.window import iso_week  # noqa: E402
from monitor.settings import StoreSettings, load_settings  # noqa: E402
from monitor.store import create_store_engine, failures, open_store  # noqa: E402
from monitor.store.schema import results, runs  # noqa: E402
from tests.report.synthetic import Spec, populate  # noqa: E402

T = TypeVar("T")
WEEK = "2026-W47"


def timed(action: Callable[[], T]) -> tuple[T, float]:
    started = time.perf_counter()
    value = action()
    return value, time.perf_counter() - started


def baseline(engine: sa.Engine, since: Any, until: Any) -> float:
    statement = (
        sa.select(sa.func.count())
        .select_from(
            runs.join(results, sa.and_(runs.c.trace_id == results.c.trace_id, runs.c.run_id == results.c.run_id))
        )
        .where(runs.c.first_scored_at >= since, runs.c.first_scored_at < until)
    )
    with engine.connect() as conn:
        conn.execute(statement).scalar_one()  # warm the cache as the report's queries find it
        started = time.perf_counter()
        conn.execute(statement).scalar_one()
        return time.perf_counter() - started


def bench(url: str, n_runs: int, out: Path | None) -> dict[str, float]:
    window = iso_week(WEEK)
    previous = window.previous()
    open_store(StoreSettings(url=url)).close()
    engine = create_store_engine(url, statement_timeout_s=600)
    _, insert_s = timed(lambda: populate(engine, Spec(since=window.since, runs=n_runs, seed=1)))
    populate(engine, Spec(since=previous.since, runs=max(1, n_runs // 5), seed=2))
    settings = load_settings(None, store={"url": url})
    report = settings.report
    base = baseline(engine, window.since, window.until)

    def queries() -> tuple[Any, ...]:
        current = failures.load_window(engine, window.since, window.until, examples=report.examples)
        before = failures.load_window(engine, previous.since, previous.until, examples=0)
        defs = DefinitionIndex(failures.tool_definitions_of(engine))
        scorers = failures.scorer_summaries(engine, window.since, window.until)
        buckets = failures.score_buckets(engine, window.since, window.until)
        spend = failures.judge_spend(engine, window.since, window.until)
        previous_spend = failures.judge_spend(engine, previous.since, previous.until)
        feats = failures.features(engine)
        return current, before, defs, scorers, buckets, spend, previous_spend, feats

    (current, before, defs, scorers, buckets, spend, previous_spend, feats), query_s = timed(queries)

    def analysis() -> Any:
        return analyze(current, before, defs, significance=report.significance, examples=report.examples)

    result, analysis_s = timed(analysis)
    wanted = [t for p in result.patterns[:60] for t in p.examples]
    examples, examples_s = timed(lambda: failures.example_runs(engine, wanted))
    query_s += examples_s
    _, recommend_s = timed(lambda: recommend(result.patterns, defs, limit=report.max_recommendations))
    analysis_s += recommend_s
    inputs = ReportInputs(
        window=window,
        features=feats,
        backend=engine.dialect.name,
        analysis=result,
        definitions=defs,
        scorers=scorers,
        buckets=buckets,
        spend=spend,
        previous_spend=previous_spend,
        examples=examples,
        tool_calls=sum(t.calls for t in current.tools),
        previous_tool_calls=sum(t.calls for t in before.tools),
        tools_seen=len({(t.agent, t.tool) for t in current.tools}),
    )
    doc, build_s = timed(lambda: build(inputs, settings))
    _, first_html_s = timed(lambda: render_html(doc))  # pays matplotlib's font loading once
    html, html_s = timed(lambda: render_html(doc))
    md, md_s = timed(lambda: render_markdown(doc))
    js, json_s = timed(lambda: render_json(doc))
    engine.dispose()
    render_s = build_s + html_s + md_s + json_s
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        for name, text in (("html", html), ("md", md), ("json", js)):
            (out / f"report-{engine.dialect.name}.{name}").write_text(text)
    total = query_s + analysis_s + render_s
    print(
        f"{engine.dialect.name:<10} runs {n_runs:>7,} (+{n_runs // 5:,} the week before)  insert {insert_s:6.1f} s\n"
        f"  queries   {query_s:6.2f} s   (baseline SELECT count(*) of the week's runs × results {base:.3f} s: "
        f"ratio {query_s / base if base > 0 else float('inf'):.1f}×)\n"
        f"  analysis  {analysis_s:6.2f} s   ({len(result.patterns)} patterns, {len(result.confusions)} confusions)\n"
        f"  rendering {render_s:6.2f} s   (HTML {html_s:.2f} s warm, first {first_html_s:.2f} s; Markdown "
        f"{md_s:.2f} s; JSON + schema {json_s:.2f} s; {len(html) / 1e6:.2f} MB HTML)\n"
        f"  total     {total:6.2f} s",
        flush=True,
    )
    return {"queries": query_s, "analysis": analysis_s, "rendering": render_s, "baseline": base, "total": total}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=100_000, help="runs in the reported week")
    parser.add_argument("--postgres", action="store_true", help="also on a throwaway PostgreSQL cluster")
    parser.add_argument("--keep", type=Path, default=None, help="write the rendered reports to this directory")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        bench(f"sqlite:///{Path(tmp) / 'bench.db'}", args.runs, args.keep)
    if args.postgres:
        from tests.support.postgres import PostgresCluster

        with PostgresCluster.running_cluster() as cluster:
            url = cluster.create_database()
            bench(url, args.runs, args.keep)
    return 0


if __name__ == "__main__":
    sys.exit(main())
