"""The monthly report's metrics: revenue, growth, top products and regions, in the task's currency.

Money is computed in :class:`~decimal.Decimal` and converted through the dataset's fixed rates, so the
same data always gives the same report.
"""

from __future__ import annotations

from collections import defaultdict
from decimal import ROUND_HALF_UP, Decimal

from memory.artifact_store import sha256_hex
from memory.reports.monthly.common import json_bytes, month_bounds, rows_of
from memory.reports.sales import RATES_TO_CNY
from memory.tasks.contract import ProducedArtifact, StepContext, StepFailed, StepOutcome

CENT = Decimal("0.01")


def _money(value: Decimal) -> str:
    return str(value.quantize(CENT, rounding=ROUND_HALF_UP))


def calculate_metrics(ctx: StepContext) -> StepOutcome:
    """Revenue, month-over-month growth, top products and regions, in the task's currency."""
    target = ctx.goal["currency"]
    if target not in RATES_TO_CNY:
        raise StepFailed("unknown_currency", f"no conversion rate for {target}")
    month_start = month_bounds(ctx.goal["month"])[1].isoformat()
    revenue = {"month": Decimal(0), "previous": Decimal(0)}
    products: dict[str, Decimal] = defaultdict(Decimal)
    regions: dict[str, Decimal] = defaultdict(Decimal)
    daily: dict[str, Decimal] = defaultdict(Decimal)
    source_currencies: dict[str, int] = defaultdict(int)
    for row in rows_of(ctx.read_artifact(ctx.inputs["validate_data"]["clean_sha256"])):
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
    content = json_bytes(metrics)
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
