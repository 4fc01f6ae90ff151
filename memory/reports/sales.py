"""The tenant's sales table, and a deterministic, seeded sample of it: what the monthly report reads.

The same seed always produces the same lines, so a report's numbers are
reproducible and tests can compute expectations independently. A handful of
lines are deliberately bad (negative quantity, missing region or price,
unknown currency) so validation has something real to reject.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from sqlalchemy import BigInteger, Date, ForeignKey, Integer, Numeric, Text, func, select, text
from sqlalchemy.orm import Mapped, Session, mapped_column

from memory.models import Base

DEFAULT_SEED = 20260601
DEFAULT_LINES = 120_000
MONTHS = tuple(
    f"{year}-{month:02d}" for year, month in [(2025, m) for m in range(7, 13)] + [(2026, m) for m in range(1, 7)]
)
REGIONS = ("east", "north", "south", "west", "central")
REGION_WEIGHTS = (30, 22, 20, 15, 13)
PRODUCTS: dict[str, Decimal] = {
    "analytics-suite": Decimal("1200.00"),
    "cloud-storage-1tb": Decimal("86.00"),
    "data-pipeline": Decimal("640.00"),
    "edge-gateway": Decimal("2300.00"),
    "field-sensor": Decimal("45.00"),
    "gpu-hours-100": Decimal("910.00"),
    "helpdesk-seat": Decimal("35.00"),
    "identity-pro": Decimal("150.00"),
    "journal-archive": Decimal("60.00"),
    "knowledge-base": Decimal("220.00"),
    "label-printer": Decimal("380.00"),
    "mobile-sdk": Decimal("520.00"),
}
RATES_TO_CNY: dict[str, Decimal] = {"CNY": Decimal("1"), "USD": Decimal("7.10"), "EUR": Decimal("7.80")}
"""Fixed conversion rates of the dataset (CNY per unit), so conversions are reproducible."""
CURRENCY_WEIGHTS = (("CNY", 70), ("USD", 20), ("EUR", 10))
BAD_LINES = 30
"""About this many lines of any dataset are broken, each in one of four ways."""


class SalesOrderLine(Base):
    """One line of the tenant's sales system: what monthly reports are computed from."""

    __tablename__ = "sales_order_lines"

    tenant_id: Mapped[str] = mapped_column(Text, ForeignKey("tenants.tenant_id"), primary_key=True)
    line_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    order_id: Mapped[str] = mapped_column(Text)
    order_date: Mapped[date] = mapped_column(Date)
    region: Mapped[str | None] = mapped_column(Text)
    product: Mapped[str] = mapped_column(Text)
    currency: Mapped[str] = mapped_column(Text)
    quantity: Mapped[int] = mapped_column(Integer)
    unit_price: Mapped[Decimal | None] = mapped_column(Numeric(12, 2))


@dataclass(frozen=True)
class Line:
    line_id: int
    order_id: str
    order_date: date
    region: str | None
    product: str
    currency: str
    quantity: int
    unit_price: Decimal | None


def _month_lines(total: int) -> list[int]:
    """Lines per month with a gentle upward trend, summing to ``total``."""
    weights = [100 + 4 * i for i in range(len(MONTHS))]
    counts = [total * w // sum(weights) for w in weights]
    counts[-1] += total - sum(counts)
    return counts


def generate_lines(total: int = DEFAULT_LINES, seed: int = DEFAULT_SEED) -> Iterator[Line]:
    """The dataset, line by line, in ``line_id`` order."""
    rng = random.Random(seed)
    currencies = [c for c, _ in CURRENCY_WEIGHTS]
    currency_weights = [w for _, w in CURRENCY_WEIGHTS]
    products = sorted(PRODUCTS)
    product_weights = [len(products) - i for i in range(len(products))]
    bad_every = max(total // BAD_LINES, 7)
    line_id = 0
    for month, count in zip(MONTHS, _month_lines(total), strict=True):
        year, mon = (int(part) for part in month.split("-"))
        days = 30 if mon in (4, 6, 9, 11) else 28 if mon == 2 else 31
        for _ in range(count):
            line_id += 1
            region: str | None = rng.choices(REGIONS, REGION_WEIGHTS)[0]
            product = rng.choices(products, product_weights)[0]
            currency = rng.choices(currencies, currency_weights)[0]
            quantity = rng.randint(1, 20)
            factor = Decimal(rng.randint(90, 110)) / 100
            price: Decimal | None = (PRODUCTS[product] / RATES_TO_CNY[currency] * factor).quantize(Decimal("0.01"))
            day = rng.randint(1, days)
            if line_id % bad_every == 0:
                flaw = (line_id // bad_every) % 4
                if flaw == 0:
                    quantity = -quantity
                elif flaw == 1:
                    region = None
                elif flaw == 2:
                    price = None
                else:
                    currency = "XXX"
            order_id = f"o-{line_id // 3:07d}"
            yield Line(line_id, order_id, date(year, mon, day), region, product, currency, quantity, price)


def seed_sales(session: Session, tenant_id: str, total: int = DEFAULT_LINES, seed: int = DEFAULT_SEED) -> int:
    """Load the dataset into the tenant's ``sales_order_lines`` once; returns the tenant's line count.

    COPY does not run against row-level-secured tables, so lines are copied into a
    temporary table and moved with one INSERT … SELECT that RLS checks.
    """
    session.execute(text("SELECT pg_advisory_xact_lock(hashtext('sales:' || :tenant))"), {"tenant": tenant_id})
    existing = session.execute(
        select(func.count()).select_from(SalesOrderLine).where(SalesOrderLine.tenant_id == tenant_id)
    ).scalar_one()
    if existing:
        return int(existing)
    session.execute(
        text(
            "CREATE TEMP TABLE sales_load (line_id bigint, order_id text, order_date date, region text, "
            "product text, currency text, quantity integer, unit_price numeric(12,2)) ON COMMIT DROP"
        )
    )
    raw = session.connection().connection.driver_connection
    assert raw is not None  # a checked-out connection always has its psycopg connection
    columns = "line_id, order_id, order_date, region, product, currency, quantity, unit_price"
    with raw.cursor() as cursor, cursor.copy(f"COPY sales_load ({columns}) FROM STDIN") as copy:
        for line in generate_lines(total, seed):
            copy.write_row(
                (line.line_id, line.order_id, line.order_date, line.region, line.product,
                 line.currency, line.quantity, line.unit_price)
            )
    session.execute(
        text(
            "INSERT INTO sales_order_lines (tenant_id, line_id, order_id, order_date, region, product, currency, "
            "quantity, unit_price) SELECT :tenant, line_id, order_id, order_date, region, product, currency, "
            "quantity, unit_price FROM sales_load"
        ),
        {"tenant": tenant_id},
    )
    return total
