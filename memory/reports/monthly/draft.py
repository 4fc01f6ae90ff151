"""The monthly report's draft, what its approver is asked, and the files a destination receives."""

from __future__ import annotations

import json

from memory.artifact_store import sha256_hex
from memory.reports.monthly.common import amount, json_bytes, money
from memory.reports.monthly.page import growth_text, render
from memory.tasks.contract import ProducedArtifact, StepContext, StepOutcome


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
        f"- Revenue: **{money(metrics['revenue'], currency)}**",
        f"- Previous month ({metrics['previous_month']}): {money(metrics['previous_revenue'], currency)}",
        f"- Month-over-month growth: {growth_text(metrics['growth'])}",
        f"- Order lines used: {validation['accepted']}; rejected by validation: {validation['rejected']}"
        + (f" ({', '.join(f'{k}: {v}' for k, v in validation['reasons'].items())})" if validation["reasons"] else ""),
        "",
        "## Top products",
        "",
        f"| product | revenue ({currency}) |",
        "| --- | ---: |",
        *[f"| {p['product']} | {amount(p['revenue'])} |" for p in metrics["top_products"]],
        "",
        "## Regions",
        "",
        f"| region | revenue ({currency}) |",
        "| --- | ---: |",
        *[f"| {r['region']} | {amount(r['revenue'])} |" for r in metrics["regions"]],
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
    page = render(metrics, validation, charts, revision, note, title, ctx.read_artifact)
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
            "summary": f"{draft['title']}, revision {draft['revision']}: revenue "
            f"{money(metrics['revenue'], metrics['currency'])}, growth {growth_text(metrics['growth'])}",
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
