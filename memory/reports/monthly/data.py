"""The monthly report's data steps: load the order lines, then split them into clean and rejected ones."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sqlalchemy import select

from memory.artifact_store import sha256_hex
from memory.reports.monthly.common import csv_bytes, json_bytes, month_bounds, rows_of
from memory.reports.sales import RATES_TO_CNY, SalesOrderLine
from memory.tasks.contract import ProducedArtifact, StepContext, StepFailed, StepOutcome


def load_data(ctx: StepContext) -> StepOutcome:
    """The month's and the previous month's order lines, exactly as the sales table holds them."""
    month = ctx.goal["month"]
    previous, start, following, previous_label = month_bounds(month)
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
        rows: list[dict[str, Any]] = [
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
    content = csv_bytes(rows)
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


def validate_data(ctx: StepContext) -> StepOutcome:
    """Split the lines into clean ones and rejected ones, each rejection with its reasons."""
    rows = rows_of(ctx.read_artifact(ctx.inputs["load_data"]["data_sha256"]))
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
    clean_content, rejected_content = csv_bytes(clean), json_bytes(rejected)
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

