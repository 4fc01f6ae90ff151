"""The sales dataset is deterministic, has a few bad lines, and loads into PostgreSQL once per tenant."""

from __future__ import annotations

import uuid
from collections import Counter

from sqlalchemy import Engine, func, select

from memory.db import tenant_session
from memory.reports.sales import MONTHS, RATES_TO_CNY, SalesOrderLine, generate_lines, seed_sales
from tests.conftest import MakeKey


def test_the_same_seed_gives_the_same_lines_and_another_seed_does_not() -> None:
    first = list(generate_lines(3_000, seed=7))
    assert first == list(generate_lines(3_000, seed=7))
    assert first != list(generate_lines(3_000, seed=8))


def test_the_default_dataset_is_big_varied_and_a_little_dirty() -> None:
    lines = list(generate_lines())
    assert len(lines) >= 100_000
    assert {line.order_date.strftime("%Y-%m") for line in lines} == set(MONTHS)
    assert len({line.region for line in lines if line.region}) >= 4
    assert len({line.product for line in lines}) >= 10
    currencies = Counter(line.currency for line in lines)
    assert len(set(currencies) & set(RATES_TO_CNY)) >= 2
    flaws = Counter(
        "quantity"
        if line.quantity <= 0
        else "region"
        if line.region is None
        else "price"
        if line.unit_price is None
        else "currency"
        if line.currency not in RATES_TO_CNY
        else None
        for line in lines
    )
    bad = sum(count for flaw, count in flaws.items() if flaw)
    assert 10 <= bad <= 100
    assert {"quantity", "region", "price", "currency"} <= set(flaws)


def test_seeding_is_once_per_tenant(engine: Engine, make_key: MakeKey) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    make_key(tenant=tenant)
    with tenant_session(engine, tenant) as session:
        assert seed_sales(session, tenant, total=500) == 500
    with tenant_session(engine, tenant) as session:
        assert seed_sales(session, tenant, total=500) == 500
        count = session.execute(select(func.count()).select_from(SalesOrderLine)).scalar_one()
    assert count == 500
