"""What the monthly report's steps share: month arithmetic and the CSV / JSON renderings of their artifacts."""

from __future__ import annotations

import csv
import io
import json
from datetime import date
from decimal import Decimal
from typing import Any

COLUMNS = ("line_id", "order_id", "order_date", "region", "product", "currency", "quantity", "unit_price")


def month_bounds(month: str) -> tuple[date, date, date, str]:
    """(previous month start, month start, next month start, previous month label)."""
    year, mon = (int(part) for part in month.split("-"))
    start = date(year, mon, 1)
    following = date(year + (mon == 12), mon % 12 + 1, 1)
    previous = date(year - (mon == 1), (mon - 2) % 12 + 1, 1)
    return previous, start, following, previous.strftime("%Y-%m")


def csv_bytes(rows: list[dict[str, Any]]) -> bytes:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue().encode()


def rows_of(content: bytes) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(content.decode())))


def json_bytes(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False).encode()



def amount(value: str) -> str:
    """A money amount as a reader writes it: thousands separated, two decimals ("12,345,678.50")."""
    return f"{Decimal(value):,.2f}"


def money(value: str, currency: str) -> str:
    """An amount with its currency ("12,345,678.50 CNY")."""
    return f"{amount(value)} {currency}"
