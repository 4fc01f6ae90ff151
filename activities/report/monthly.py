"""The monthly sales report (seed 003 §14): its seven steps.

Money is computed in :class:`~decimal.Decimal` and converted through the
dataset's fixed rates, so the same data always gives the same report.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import json
from collections import defaultdict
from datetime import date
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from sqlalchemy import select

from activities.report.registry import ProducedArtifact, StepContext, StepFailed, StepOutcome, register
from activities.stores import sha256_hex
from memory.reportdata import RATES_TO_CNY
from memory.tasks.models import SalesOrderLine

TYPE = "monthly-report"
COLUMNS = ("line_id", "order_id", "order_date", "region", "product", "currency", "quantity", "unit_price")
CENT = Decimal("0.01")


def _month_bounds(month: str) -> tuple[date, date, date, str]:
    """(previous month start, month start, next month start, previous month label)."""
    year, mon = (int(part) for part in month.split("-"))
    start = date(year, mon, 1)
    following = date(year + (mon == 12), mon % 12 + 1, 1)
    previous = date(year - (mon == 1), (mon - 2) % 12 + 1, 1)
    return previous, start, following, previous.strftime("%Y-%m")


def _csv(rows: list[dict[str, Any]]) -> bytes:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue().encode()


def _rows(content: bytes) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(content.decode())))


def _json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False).encode()


@register(TYPE, "load_data")
def load_data(ctx: StepContext) -> StepOutcome:
    """The month's and the previous month's order lines, exactly as the sales table holds them."""
    month = ctx.goal["month"]
    previous, start, following, previous_label = _month_bounds(month)
    with ctx.session() as session:
        lines = session.execute(
            select(SalesOrderLine)
            .where(
                SalesOrderLine.tenant_id == ctx.tenant_id,
                SalesOrderLine.order_date >= previous,
                SalesOrderLine.order_date < following,
            )
            .order_by(SalesOrderLine.line_id)
        ).scalars()
        rows = [
            {
                "line_id": line.line_id,
                "order_id": line.order_id,
                "order_date": line.order_date.isoformat(),
                "region": line.region or "",
                "product": line.product,
                "currency": line.currency,
                "quantity": line.quantity,
                "unit_price": "" if line.unit_price is None else str(line.unit_price),
            }
            for line in lines
        ]
    in_month = sum(1 for row in rows if row["order_date"] >= start.isoformat())
    if in_month == 0:
        raise StepFailed("no_data", f"the sales table has no order lines for {month}")
    content = _csv(rows)
    return StepOutcome(
        output={
            "data_sha256": sha256_hex(content),
            "rows": len(rows),
            "month_rows": in_month,
            "month": month,
            "previous_month": previous_label,
        },
        artifacts=[ProducedArtifact(f"sales-{previous_label}-{month}.csv", "data", "text/csv", content)],
    )


def _problems(row: dict[str, str]) -> list[str]:
    reasons = []
    try:
        if int(row["quantity"]) <= 0:
            reasons.append("non_positive_quantity")
    except ValueError:
        reasons.append("invalid_quantity")
    if not row["region"]:
        reasons.append("missing_region")
    if not row["unit_price"]:
        reasons.append("missing_unit_price")
    if row["currency"] not in RATES_TO_CNY:
        reasons.append("unknown_currency")
    return reasons


@register(TYPE, "validate_data")
def validate_data(ctx: StepContext) -> StepOutcome:
    """Split the lines into clean ones and rejected ones, each rejection with its reasons."""
    rows = _rows(ctx.read_artifact(ctx.inputs["load_data"]["data_sha256"]))
    clean: list[dict[str, Any]] = []
    rejected: list[dict[str, Any]] = []
    counts: dict[str, int] = defaultdict(int)
    for row in rows:
        reasons = _problems(row)
        if reasons:
            rejected.append({"line_id": int(row["line_id"]), "order_id": row["order_id"], "reasons": reasons})
            for reason in reasons:
                counts[reason] += 1
        else:
            clean.append(row)
    if not clean:
        raise StepFailed("no_valid_data", "every order line was rejected by validation")
    clean_content, rejected_content = _csv(clean), _json(rejected)
    return StepOutcome(
        output={
            "clean_sha256": sha256_hex(clean_content),
            "rejected_sha256": sha256_hex(rejected_content),
            "accepted": len(clean),
            "rejected": len(rejected),
            "reasons": dict(sorted(counts.items())),
        },
        artifacts=[
            ProducedArtifact("clean-lines.csv", "data", "text/csv", clean_content),
            ProducedArtifact("rejected-lines.json", "validation", "application/json", rejected_content),
        ],
    )


def _money(value: Decimal) -> str:
    return str(value.quantize(CENT, rounding=ROUND_HALF_UP))


@register(TYPE, "calculate_metrics")
def calculate_metrics(ctx: StepContext) -> StepOutcome:
    """Revenue, month-over-month growth, top products and regions, in the task's currency."""
    target = ctx.goal["currency"]
    if target not in RATES_TO_CNY:
        raise StepFailed("unknown_currency", f"no conversion rate for {target}")
    month_start = _month_bounds(ctx.goal["month"])[1].isoformat()
    revenue = {"month": Decimal(0), "previous": Decimal(0)}
    products: dict[str, Decimal] = defaultdict(Decimal)
    regions: dict[str, Decimal] = defaultdict(Decimal)
    daily: dict[str, Decimal] = defaultdict(Decimal)
    source_currencies: dict[str, int] = defaultdict(int)
    for row in _rows(ctx.read_artifact(ctx.inputs["validate_data"]["clean_sha256"])):
        amount = Decimal(row["quantity"]) * Decimal(row["unit_price"]) * RATES_TO_CNY[row["currency"]]
        amount /= RATES_TO_CNY[target]
        if row["order_date"] >= month_start:
            revenue["month"] += amount
            products[row["product"]] += amount
            regions[row["region"]] += amount
            daily[row["order_date"]] += amount
            source_currencies[row["currency"]] += 1
        else:
            revenue["previous"] += amount
    growth = None
    if revenue["previous"]:
        growth = float(((revenue["month"] - revenue["previous"]) / revenue["previous"]).quantize(Decimal("0.0001")))
    metrics = {
        "month": ctx.goal["month"],
        "previous_month": ctx.inputs["load_data"]["previous_month"],
        "currency": target,
        "rates_to_cny": {code: str(rate) for code, rate in sorted(RATES_TO_CNY.items())},
        "revenue": _money(revenue["month"]),
        "previous_revenue": _money(revenue["previous"]),
        "growth": growth,
        "top_products": [
            {"product": name, "revenue": _money(value)}
            for name, value in sorted(products.items(), key=lambda item: (-item[1], item[0]))[:5]
        ],
        "regions": [
            {"region": name, "revenue": _money(value)}
            for name, value in sorted(regions.items(), key=lambda item: (-item[1], item[0]))
        ],
        "daily": [{"date": day, "revenue": _money(value)} for day, value in sorted(daily.items())],
        "lines_by_source_currency": dict(sorted(source_currencies.items())),
    }
    content = _json(metrics)
    return StepOutcome(
        output={
            "metrics_sha256": sha256_hex(content),
            "revenue": metrics["revenue"],
            "previous_revenue": metrics["previous_revenue"],
            "growth": growth,
            "currency": target,
        },
        artifacts=[ProducedArtifact("metrics.json", "metrics", "application/json", content)],
    )


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


@register(TYPE, "generate_charts")
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
    axes.plot([int(d["date"][-2:]) for d in metrics["daily"]], [float(d["revenue"]) for d in metrics["daily"]], marker="o")
    axes.set_title(f"Daily revenue, {metrics['month']}")
    axes.set_xlabel("day")
    axes.set_ylabel(currency)
    charts["daily"] = _png(figure)
    return StepOutcome(
        output={"charts": {name: sha256_hex(content) for name, content in charts.items()}},
        artifacts=[ProducedArtifact(f"chart-{name}.png", "chart", "image/png", content) for name, content in charts.items()],
    )


def _growth_text(growth: float | None) -> str:
    return "n/a (no revenue in the previous month)" if growth is None else f"{growth * 100:+.2f}%"


@register(TYPE, "generate_draft")
def generate_draft(ctx: StepContext) -> StepOutcome:
    """A Markdown and an HTML report (charts embedded), bound together by a manifest: the draft."""
    metrics = json.loads(ctx.read_artifact(ctx.inputs["calculate_metrics"]["metrics_sha256"]))
    validation = ctx.inputs["validate_data"]
    charts: dict[str, str] = ctx.inputs["generate_charts"]["charts"]
    revision = int(ctx.extra.get("revision", 1))
    note = ctx.extra.get("reviewer_note")
    currency = metrics["currency"]
    title = f"Monthly sales report {metrics['month']} ({currency})"
    md = [f"# {title}", "", f"Revision {revision}."]
    if note:
        md += ["", f"Revised after review: {note}"]
    md += [
        "",
        f"- Revenue: **{metrics['revenue']} {currency}**",
        f"- Previous month ({metrics['previous_month']}): {metrics['previous_revenue']} {currency}",
        f"- Month-over-month growth: {_growth_text(metrics['growth'])}",
        f"- Order lines used: {validation['accepted']}; rejected by validation: {validation['rejected']}"
        + (f" ({', '.join(f'{k}: {v}' for k, v in validation['reasons'].items())})" if validation["reasons"] else ""),
        "",
        "## Top products",
        "",
        f"| product | revenue ({currency}) |",
        "| --- | ---: |",
        *[f"| {p['product']} | {p['revenue']} |" for p in metrics["top_products"]],
        "",
        "## Regions",
        "",
        f"| region | revenue ({currency}) |",
        "| --- | ---: |",
        *[f"| {r['region']} | {r['revenue']} |" for r in metrics["regions"]],
        "",
        "## Charts",
        "",
        *[f"![{name}](artifact:{sha})" for name, sha in charts.items()],
        "",
        "Amounts converted at fixed rates (CNY per unit): "
        + ", ".join(f"{code} {rate}" for code, rate in metrics["rates_to_cny"].items())
        + ".",
        "",
    ]
    markdown = "\n".join(md).encode()
    esc = html.escape

    def table(rows: list[dict[str, str]], key: str) -> str:
        body = "".join(f"<tr><td>{esc(r[key])}</td><td style='text-align:right'>{esc(r['revenue'])}</td></tr>" for r in rows)
        return f"<table><tr><th>{key}</th><th>revenue ({esc(currency)})</th></tr>{body}</table>"

    images = "".join(
        f"<figure><img alt='{esc(name)}' src='data:image/png;base64,"
        f"{base64.b64encode(ctx.read_artifact(sha)).decode()}'/><figcaption>{esc(name)}</figcaption></figure>"
        for name, sha in charts.items()
    )
    page = (
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{esc(title)}</title></head><body>"
        f"<h1>{esc(title)}</h1><p>Revision {revision}.</p>"
        + (f"<p>Revised after review: {esc(note)}</p>" if note else "")
        + f"<ul><li>Revenue: <strong>{esc(metrics['revenue'])} {esc(currency)}</strong></li>"
        f"<li>Previous month ({esc(metrics['previous_month'])}): {esc(metrics['previous_revenue'])}</li>"
        f"<li>Month-over-month growth: {esc(_growth_text(metrics['growth']))}</li>"
        f"<li>Order lines used: {validation['accepted']}; rejected: {validation['rejected']}</li></ul>"
        f"<h2>Top products</h2>{table(metrics['top_products'], 'product')}"
        f"<h2>Regions</h2>{table(metrics['regions'], 'region')}<h2>Charts</h2>{images}</body></html>"
    ).encode()
    manifest = _json(
        {
            "kind": "report-draft",
            "task_id": ctx.task_id,
            "title": title,
            "revision": revision,
            "markdown_sha256": sha256_hex(markdown),
            "html_sha256": sha256_hex(page),
            "charts": charts,
            "metrics_sha256": ctx.inputs["calculate_metrics"]["metrics_sha256"],
        }
    )
    return StepOutcome(
        output={
            "draft_sha256": sha256_hex(manifest),
            "markdown_sha256": sha256_hex(markdown),
            "html_sha256": sha256_hex(page),
            "revision": revision,
            "title": title,
        },
        artifacts=[
            ProducedArtifact("report.md", "report", "text/markdown", markdown),
            ProducedArtifact("report.html", "report", "text/html", page),
            ProducedArtifact("draft.json", "draft", "application/json", manifest),
        ],
    )


@register(TYPE, "request_approval")
def request_approval(ctx: StepContext) -> StepOutcome:
    """What the approver is asked to approve: the draft's hash and its headline numbers."""
    draft = ctx.inputs["generate_draft"]
    metrics = ctx.inputs["calculate_metrics"]
    return StepOutcome(
        output={
            "approval_type": "publish",
            "artifact_sha256": draft["draft_sha256"],
            "summary": f"{draft['title']}, revision {draft['revision']}: revenue {metrics['revenue']} "
            f"{metrics['currency']}, growth {_growth_text(metrics['growth'])}",
        }
    )


@register(TYPE, "publish_report")
def publish_report(ctx: StepContext) -> StepOutcome:
    """The files a destination receives: the approved draft's HTML, Markdown and manifest."""
    draft_sha = ctx.extra["artifact_sha256"]
    manifest_bytes = ctx.read_artifact(draft_sha)
    manifest = json.loads(manifest_bytes)
    return StepOutcome(
        output={"title": manifest["title"], "revision": manifest["revision"]},
        artifacts=[
            ProducedArtifact("report.html", "publication", "text/html", ctx.read_artifact(manifest["html_sha256"])),
            ProducedArtifact("report.md", "publication", "text/markdown", ctx.read_artifact(manifest["markdown_sha256"])),
            ProducedArtifact("draft.json", "publication", "application/json", manifest_bytes),
        ],
    )
