"""The published report reads as finished (issue 24 item 6): amounts with separators and the currency, charts
whose axes say 12,000,000 rather than 1e7 (read from matplotlib's own tick labels), sized to be read, and a
page with real typography (CJK included) and print styles. The steps run for real on a month of figures."""

from __future__ import annotations

import io
import json
import time
import warnings
from typing import Any

import pytest
from PIL import Image

from memory import offload
from memory.artifact_store import sha256_hex
from memory.reports.monthly.charts import chart_figures, font_family, generate_charts, png
from memory.reports.monthly.draft import generate_draft, request_approval
from memory.tasks.contract import StepContext, StepOutcome

METRICS: dict[str, Any] = {
    "month": "2026-06", "previous_month": "2026-05", "currency": "CNY",
    "rates_to_cny": {"CNY": "1", "EUR": "7.80", "USD": "7.10"},
    "revenue": "48123456.70", "previous_revenue": "39000000.00", "growth": 0.2339,
    "top_products": [{"product": "edge-gateway", "revenue": "21345678.90"},
                     {"product": "analytics-suite", "revenue": "15000000.00"}],
    "regions": [{"region": "华东", "revenue": "30123456.70"}, {"region": "north", "revenue": "18000000.00"}],
    "daily": [{"date": f"2026-06-{day:02d}", "revenue": f"{1_500_000 + day * 10_000}.00"} for day in range(1, 31)],
    "lines_by_source_currency": {"CNY": 10},
}


def _context(store: dict[str, bytes], inputs: dict[str, dict[str, Any]]) -> StepContext:
    def unused() -> Any:
        raise AssertionError("the drawing steps read no source data")

    return StepContext("t", "task-1", "monthly-report", {"month": "2026-06", "currency": "CNY"}, "v1", inputs,
                       {}, unused, store.__getitem__, lambda: None)


def _stored(store: dict[str, bytes], outcome: StepOutcome) -> None:
    for artifact in outcome.artifacts:
        store[sha256_hex(artifact.content)] = artifact.content


def test_amount_axes_carry_whole_amounts_with_separators_never_scientific_notation() -> None:
    for name, figure in chart_figures(METRICS).items():
        figure.draw_without_rendering()  # lays out the ticks as savefig does
        [axes] = figure.axes
        amounts = axes.yaxis if name != "products" else axes.xaxis
        labels = [label.get_text() for label in amounts.get_ticklabels() if label.get_text()]
        assert labels and amounts.get_offset_text().get_text() == "", (name, labels)
        assert not any("e+" in label or "e7" in label or "1e" in label for label in labels), (name, labels)
        assert any("," in label and label.replace(",", "").isdigit() for label in labels), (name, labels)
        assert all(label.replace(",", "").isdigit() for label in labels), (name, labels)


def test_charts_are_large_enough_to_read_and_the_draft_formats_every_amount() -> None:
    store: dict[str, bytes] = {}
    metrics_bytes = json.dumps(METRICS).encode()
    store[sha256_hex(metrics_bytes)] = metrics_bytes
    inputs: dict[str, dict[str, Any]] = {"calculate_metrics": {"metrics_sha256": sha256_hex(metrics_bytes),
                                                               "revenue": METRICS["revenue"], "currency": "CNY",
                                                               "growth": METRICS["growth"]}}
    charts = generate_charts(_context(store, inputs))
    _stored(store, charts)
    for artifact in charts.artifacts:
        assert Image.open(io.BytesIO(artifact.content)).size == (1500, 750)
    inputs["generate_charts"] = charts.output
    inputs["validate_data"] = {"accepted": 12345, "rejected": 30, "reasons": {"missing_region": 30}}
    draft = generate_draft(_context(store, inputs))
    files = {a.name: a.content.decode() for a in draft.artifacts}
    page, markdown = files["report.html"], files["report.md"]
    for shown in ("48,123,456.70 CNY", "39,000,000.00 CNY", "21,345,678.90", "30,123,456.70", "+23.39%", "12,345"):
        assert shown in page, shown
    assert "48123456.70" not in page and "21345678.90" not in page
    assert "**48,123,456.70 CNY**" in markdown and "| edge-gateway | 21,345,678.90 |" in markdown
    assert "华东" in page and "WenQuanYi Micro Hei" in page and "Noto Sans CJK SC" in page  # a CJK font stack
    assert "@media print" in page and "break-inside: avoid" in page and "@page" in page
    assert page.count("data:image/png;base64,") == 3
    inputs["generate_draft"] = draft.output
    summary = request_approval(_context(store, inputs)).output["summary"]
    assert "revenue 48,123,456.70 CNY" in summary


def test_chinese_labels_are_drawn_in_a_cjk_font_not_as_missing_glyphs() -> None:
    """scripts/ensure-browser installs fonts-wqy-microhei; before, "华东" was drawn as empty boxes in DejaVu Sans."""
    assert "WenQuanYi Micro Hei" in font_family()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib warns "Glyph ... missing from font(s)" for each box it draws
        for figure in chart_figures(METRICS).values():
            png(figure)


def _render_cpu(store: dict[str, bytes], inputs: dict[str, dict[str, Any]]) -> tuple[float, float, StepOutcome]:
    """The generate_charts step run here: the CPU seconds of this thread and of this whole process, and its outcome."""
    thread, process = time.thread_time(), time.process_time()
    outcome = generate_charts(_context(store, inputs))
    return time.thread_time() - thread, time.process_time() - process, outcome


def test_charts_render_in_the_cpu_pool_not_on_the_step_thread_with_the_same_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 28: matplotlib on the activity's thread held the worker's interpreter lock ~0.3 s per task (its event
    loop and heartbeats waited). With the process's pool started (as `mnemo worker` starts it) the step's thread and
    process spend almost no CPU on it; without one (the control) the same step burns it in place."""
    store: dict[str, bytes] = {}
    metrics_bytes = json.dumps(METRICS).encode()
    store[sha256_hex(metrics_bytes)] = metrics_bytes
    inputs: dict[str, dict[str, Any]] = {"calculate_metrics": {"metrics_sha256": sha256_hex(metrics_bytes)}}
    monkeypatch.setattr(offload, "_pool", None)  # the control, in place: the session's app may have a pool running
    assert not offload.pooled()
    thread_in_place, _, in_place = _render_cpu(store, inputs)
    monkeypatch.undo()
    assert thread_in_place > 0.1
    offload.start(1, 0)
    try:
        _render_cpu(store, inputs)  # the pool process's first render imports matplotlib and loads fonts
        thread_pooled, process_pooled, pooled = _render_cpu(store, inputs)
    finally:
        offload.stop()
    assert thread_pooled < 0.03 and process_pooled < 0.05, (thread_pooled, process_pooled, thread_in_place)
    assert pooled.output == in_place.output
    assert [a.content for a in pooled.artifacts] == [a.content for a in in_place.artifacts]
