"""The monthly report as a finance reader receives it: one self-contained HTML file (styles and charts inside)
that reads well on screen, prints on A4 (File → Print → Save as PDF gives the PDF) and can be forwarded as is.

Typography is a system font stack with CJK fonts named for each platform, so Chinese text (a reviewer's
note, a region) is set in a real CJK face rather than the browser's fallback. Amounts are thousands separated
and carry the currency. Printing keeps each table row, chart and the headline figures whole on one page.

No PDF is rendered here: WeasyPrint, the well-kept offline HTML-to-PDF library, needs Pango from the
operating system (not a wheel), which the README's "Python and nothing else" install cannot promise; every
browser prints this page to PDF with the print styles below.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Callable
from typing import Any

from memory.reports.monthly.charts import CAPTIONS
from memory.reports.monthly.common import amount, money

FONTS = (
    '-apple-system, BlinkMacSystemFont, "Segoe UI", "Helvetica Neue", Arial, "PingFang SC", "Hiragino Sans GB", '
    '"Microsoft YaHei", "Noto Sans CJK SC", "Source Han Sans SC", "WenQuanYi Micro Hei", sans-serif'
)
STYLE = f"""
:root {{ color-scheme: light; --ink: #1d2330; --muted: #5b6472; --line: #e3e6eb; --accent: #2f6db5; }}
* {{ box-sizing: border-box; }}
body {{ margin: 0; background: #f4f5f7; color: var(--ink); font: 15px/1.6 {FONTS};
  -webkit-font-smoothing: antialiased; }}
.report {{ max-width: 60rem; margin: 1.5rem auto; padding: 2.5rem 3rem; background: #fff;
  border: 1px solid var(--line); border-radius: .5rem; }}
.kicker {{ margin: 0; color: var(--accent); font-size: .8rem; font-weight: 600; letter-spacing: .08em;
  text-transform: uppercase; }}
h1 {{ margin: .25rem 0 .35rem; font-size: 1.9rem; line-height: 1.25; }}
h2 {{ margin: 2.2rem 0 .7rem; padding-bottom: .35rem; border-bottom: 1px solid var(--line); font-size: 1.2rem; }}
.meta, .note, footer {{ color: var(--muted); }}
.note {{ padding: .6rem .9rem; border-left: 3px solid var(--accent); background: #f2f6fc; color: var(--ink); }}
.figures {{ display: grid; grid-template-columns: repeat(3, 1fr); gap: 1rem; margin: 1.5rem 0 0; }}
.figure {{ padding: .9rem 1rem; border: 1px solid var(--line); border-radius: .5rem; }}
.figure .label {{ color: var(--muted); font-size: .78rem; letter-spacing: .04em; text-transform: uppercase; }}
.figure .value {{ font-size: 1.3rem; font-weight: 650; font-variant-numeric: tabular-nums; }}
.up {{ color: #1a7f37; }} .down {{ color: #b42318; }}
table {{ width: 100%; border-collapse: collapse; font-variant-numeric: tabular-nums; }}
th, td {{ padding: .5rem .7rem; border-bottom: 1px solid var(--line); text-align: left; vertical-align: top; }}
th {{ color: var(--muted); font-size: .78rem; font-weight: 600; letter-spacing: .04em; text-transform: uppercase; }}
.num {{ text-align: right; white-space: nowrap; }}
tbody tr:nth-child(even) {{ background: #fafbfc; }}
figure {{ margin: 1.2rem 0; }} figure img {{ display: block; width: 100%; height: auto; }}
figcaption {{ margin-top: .3rem; color: var(--muted); font-size: .85rem; }}
footer {{ margin-top: 2.5rem; padding-top: 1rem; border-top: 1px solid var(--line); font-size: .85rem; }}
@media (max-width: 40rem) {{
  .report {{ margin: 0; padding: 1.2rem; border: 0; }} .figures {{ grid-template-columns: 1fr; }}
}}
@page {{ size: A4; margin: 16mm 14mm; }}
@media print {{
  body {{ background: #fff; font-size: 10.5pt; }}
  .report {{ max-width: none; margin: 0; padding: 0; border: 0; }}
  h2 {{ break-after: avoid; page-break-after: avoid; }}
  tr, figure, .figures {{ break-inside: avoid; page-break-inside: avoid; }}
  thead {{ display: table-header-group; }}
  tbody tr:nth-child(even) {{ background: none; }}
}}
"""


def growth_text(growth: float | None) -> str:
    return "n/a (no revenue in the previous month)" if growth is None else f"{growth * 100:+.2f}%"


def render(
    metrics: dict[str, Any], validation: dict[str, Any], charts: dict[str, str], revision: int, note: str | None,
    title: str, read_artifact: Callable[[str], bytes],
) -> bytes:
    """The report's HTML: headline figures, the two tables, the charts (embedded) and how amounts were made."""
    esc, currency = html.escape, metrics["currency"]

    def table(rows: list[dict[str, str]], key: str) -> str:
        body = "".join(f"<tr><td>{esc(r[key])}</td><td class='num'>{amount(r['revenue'])}</td></tr>" for r in rows)
        return (f"<table><thead><tr><th>{key}</th><th class='num'>revenue ({esc(currency)})</th></tr></thead>"
                f"<tbody>{body}</tbody></table>")

    growth = metrics["growth"]
    trend = "" if growth is None else (" up" if growth >= 0 else " down")
    figures = (
        f"<div class='figures'><div class='figure'><div class='label'>Revenue</div>"
        f"<div class='value'>{money(metrics['revenue'], esc(currency))}</div></div>"
        f"<div class='figure'><div class='label'>Previous month ({esc(metrics['previous_month'])})</div>"
        f"<div class='value'>{money(metrics['previous_revenue'], esc(currency))}</div></div>"
        f"<div class='figure'><div class='label'>Month over month</div>"
        f"<div class='value{trend}'>{esc(growth_text(growth))}</div></div></div>"
    )
    images = "".join(
        f"<figure><img alt='{esc(CAPTIONS.get(name, name))}' src='data:image/png;base64,"
        f"{base64.b64encode(read_artifact(sha)).decode()}'/><figcaption>{esc(CAPTIONS.get(name, name))}"
        "</figcaption></figure>"
        for name, sha in charts.items()
    )
    reasons = ", ".join(f"{esc(k)}: {v:,}" for k, v in validation["reasons"].items())
    rates = ", ".join(f"{esc(code)} {esc(rate)}" for code, rate in metrics["rates_to_cny"].items())
    return (
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta name='viewport' content='width=device-width, initial-scale=1'><title>{esc(title)}</title>"
        f"<style>{STYLE}</style></head><body><article class='report'>"
        f"<header><p class='kicker'>Monthly sales report</p><h1>{esc(title)}</h1>"
        f"<p class='meta'>Revision {revision} · amounts in {esc(currency)} · {validation['accepted']:,} order lines"
        f"</p></header>"
        + (f"<p class='note'>Revised after review: {esc(note)}</p>" if note else "")
        + figures
        + f"<h2>Top products</h2>{table(metrics['top_products'], 'product')}"
        f"<h2>Regions</h2>{table(metrics['regions'], 'region')}<h2>Charts</h2>{images}"
        f"<footer><p>Order lines used: {validation['accepted']:,}; rejected by validation: "
        f"{validation['rejected']:,}" + (f" ({reasons})" if reasons else "") + ".</p>"
        f"<p>Amounts converted at fixed rates (CNY per unit): {rates}.</p></footer>"
        "</article></body></html>"
    ).encode()
