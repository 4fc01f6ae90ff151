"""The monthly report's draft, what its approver is asked, and the files a destination receives."""

from __future__ import annotations

import base64
import html
import json

from memory.artifact_store import sha256_hex
from memory.reports.monthly.common import json_bytes
from memory.reports.steps import ProducedArtifact, StepContext, StepOutcome


def _growth_text(growth: float | None) -> str:
    return "n/a (no revenue in the previous month)" if growth is None else f"{growth * 100:+.2f}%"


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
        body = "".join(
            f"<tr><td>{esc(r[key])}</td><td style='text-align:right'>{esc(r['revenue'])}</td></tr>" for r in rows
        )
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
    manifest = json_bytes(
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


def publish_report(ctx: StepContext) -> StepOutcome:
    """The files a destination receives: the approved draft's HTML, Markdown and manifest."""
    draft_sha = ctx.extra["artifact_sha256"]
    manifest_bytes = ctx.read_artifact(draft_sha)
    manifest = json.loads(manifest_bytes)
    return StepOutcome(
        output={"title": manifest["title"], "revision": manifest["revision"]},
        artifacts=[
            ProducedArtifact("report.html", "publication", "text/html", ctx.read_artifact(manifest["html_sha256"])),
            ProducedArtifact(
                "report.md", "publication", "text/markdown", ctx.read_artifact(manifest["markdown_sha256"])
            ),
            ProducedArtifact("draft.json", "publication", "application/json", manifest_bytes),
        ],
    )
