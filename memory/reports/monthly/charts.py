"""The monthly report's charts: PNGs rendered with matplotlib's Agg backend."""

from __future__ import annotations

import io
import json

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from memory.artifact_store import sha256_hex
from memory.reports.steps import ProducedArtifact, StepContext, StepOutcome


def _png(figure: Figure) -> bytes:
    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, metadata={"Software": None})
    return buffer.getvalue()


def _bar_chart(title: str, labels: list[str], values: list[float], currency: str, horizontal: bool) -> bytes:
    figure = Figure(figsize=(7, 4), layout="tight")
    axes = figure.add_subplot()
    if horizontal:
        axes.barh(labels[::-1], values[::-1], color="#3b6ea8")
        axes.set_xlabel(currency)
    else:
        axes.bar(labels, values, color="#3b6ea8")
        axes.set_ylabel(currency)
    axes.set_title(title)
    return _png(figure)


def generate_charts(ctx: StepContext) -> StepOutcome:
    """Three PNG charts rendered with matplotlib's Agg backend (no display, thread-safe figures)."""
    metrics = json.loads(ctx.read_artifact(ctx.inputs["calculate_metrics"]["metrics_sha256"]))
    currency = metrics["currency"]
    charts = {
        "regions": _bar_chart(
            f"Revenue by region, {metrics['month']}",
            [r["region"] for r in metrics["regions"]],
            [float(r["revenue"]) for r in metrics["regions"]],
            currency,
            horizontal=False,
        ),
        "products": _bar_chart(
            f"Top products, {metrics['month']}",
            [p["product"] for p in metrics["top_products"]],
            [float(p["revenue"]) for p in metrics["top_products"]],
            currency,
            horizontal=True,
        ),
    }
    ctx.heartbeat()
    figure = Figure(figsize=(7, 3.5), layout="tight")
    axes = figure.add_subplot()
    days = metrics["daily"]
    axes.plot([int(d["date"][-2:]) for d in days], [float(d["revenue"]) for d in days], marker="o")
    axes.set_title(f"Daily revenue, {metrics['month']}")
    axes.set_xlabel("day")
    axes.set_ylabel(currency)
    charts["daily"] = _png(figure)
    return StepOutcome(
        output={"charts": {name: sha256_hex(content) for name, content in charts.items()}},
        artifacts=[
            ProducedArtifact(f"chart-{name}.png", "chart", "image/png", content) for name, content in charts.items()
        ],
    )
