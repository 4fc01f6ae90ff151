"""The monthly report's charts: PNGs rendered with matplotlib's Agg backend, sized and labelled to be read.

Amount axes carry whole amounts with thousands separators ("12,500,000"), never matplotlib's scientific
offset ("1e7"); the figures are 10 x 5 inches at 150 dpi (1500 x 750 pixels), so a chart stays sharp at the
report's full width and when printed. Text falls back to a CJK font when one is installed (a region or
product named in Chinese), from a fixed list, so the same machine always draws the same bytes. Fonts are set
on each text, never in matplotlib's process-wide rcParams (activities run in threads side by side).
"""

from __future__ import annotations

import io
import json
from functools import cache
from typing import Any

from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.font_manager import fontManager
from matplotlib.ticker import FuncFormatter, MaxNLocator

from memory import offload
from memory.artifact_store import sha256_hex
from memory.tasks.contract import ProducedArtifact, StepContext, StepOutcome

FIGURE_SIZE = (10.0, 5.0)
DPI = 150
BAR = "#2f6db5"
FONTS = ("DejaVu Sans", "Noto Sans CJK SC", "Source Han Sans SC", "WenQuanYi Micro Hei", "WenQuanYi Zen Hei")
"""Latin first, then the CJK fonts looked for; only the installed ones are asked for (no font warnings)."""
CAPTIONS = {"regions": "Revenue by region", "products": "Top products by revenue", "daily": "Daily revenue"}


@cache
def font_family() -> list[str]:
    installed = {font.name for font in fontManager.ttflist}
    return [name for name in FONTS if name in installed] or ["sans-serif"]


def _styled(axes: Axes, title: str, xlabel: str, ylabel: str) -> None:
    """Title, labels and ticks in :func:`font_family`, set on the artists themselves: matplotlib's global
    rcParams are shared by every activity thread, so nothing here touches them."""
    family = font_family()
    axes.set_title(title, fontfamily=family, fontsize=16)  # no bold: WenQuanYi has none, and findfont would warn
    axes.set_xlabel(xlabel, fontfamily=family, fontsize=13)
    axes.set_ylabel(ylabel, fontfamily=family, fontsize=13)
    axes.tick_params(labelsize=12, labelfontfamily=family)
    axes.spines[["top", "right"]].set_visible(False)
    axes.set_axisbelow(True)


def amount_axis(axis: Axis) -> None:
    """Whole amounts with thousands separators: no scientific notation, no offset."""
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))


def _bar_chart(title: str, labels: list[str], values: list[float], currency: str, horizontal: bool) -> Figure:
    figure = Figure(figsize=FIGURE_SIZE, layout="tight")
    axes = figure.add_subplot()
    amount = f"revenue ({currency})"
    if horizontal:
        axes.barh(labels[::-1], values[::-1], color=BAR)
        _styled(axes, title, amount, "")
        amount_axis(axes.xaxis)
        axes.grid(axis="x", alpha=0.3)
    else:
        axes.bar(labels, values, color=BAR)
        _styled(axes, title, "", amount)
        amount_axis(axes.yaxis)
        axes.grid(axis="y", alpha=0.3)
    return figure


def _daily_chart(metrics: dict[str, Any]) -> Figure:
    figure = Figure(figsize=FIGURE_SIZE, layout="tight")
    axes = figure.add_subplot()
    days = metrics["daily"]
    axes.plot([int(d["date"][-2:]) for d in days], [float(d["revenue"]) for d in days], marker="o", color=BAR)
    _styled(axes, f"{CAPTIONS['daily']}, {metrics['month']}", "day of the month", f"revenue ({metrics['currency']})")
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    amount_axis(axes.yaxis)
    axes.grid(alpha=0.3)
    axes.set_ylim(bottom=0)
    return figure


def chart_figures(metrics: dict[str, Any]) -> dict[str, Figure]:
    """The three charts of ``metrics`` (the calculate_metrics artifact), as figures: a test reads their ticks."""
    currency = metrics["currency"]
    return {
        "regions": _bar_chart(
            f"{CAPTIONS['regions']}, {metrics['month']}",
            [r["region"] for r in metrics["regions"]],
            [float(r["revenue"]) for r in metrics["regions"]],
            currency,
            horizontal=False,
        ),
        "products": _bar_chart(
            f"{CAPTIONS['products']}, {metrics['month']}",
            [p["product"] for p in metrics["top_products"]],
            [float(p["revenue"]) for p in metrics["top_products"]],
            currency,
            horizontal=True,
        ),
        "daily": _daily_chart(metrics),
    }


def png(figure: Figure) -> bytes:
    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    return buffer.getvalue()


def render_charts(metrics: dict[str, Any]) -> dict[str, bytes]:
    """The three charts' PNG bytes: ~0.3 s of CPU under the interpreter lock, sent to the CPU pool whole."""
    return {name: png(figure) for name, figure in chart_figures(metrics).items()}


def generate_charts(ctx: StepContext) -> StepOutcome:
    """Three PNG charts rendered with matplotlib's Agg backend, in the process's CPU pool (:mod:`memory.offload`)
    when it has one: rendered on the activity's thread they held the worker's interpreter lock, so its event
    loop, polls and heartbeats waited, and one worker process used one core however many it was given."""
    metrics = json.loads(ctx.read_artifact(ctx.inputs["calculate_metrics"]["metrics_sha256"]))
    charts = offload.run(render_charts, metrics, beat=ctx.heartbeat)
    return StepOutcome(
        output={"charts": {name: sha256_hex(content) for name, content in charts.items()}},
        artifacts=[
            ProducedArtifact(f"chart-{name}.png", "chart", "image/png", content) for name, content in charts.items()
        ],
    )
