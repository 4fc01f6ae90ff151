"""How the console shows any task's artifact: one choice by media type, for every definition's tasks.

Agents and steps write what they like, so nothing they wrote is trusted as markup. Templates autoescape; the only
HTML the console itself builds from an artifact is markdown-it's output with raw HTML off (a ``<script>`` in
Markdown is shown as text) and its link check on (no ``javascript:`` links), remote images shown as links (an
approver's browser fetches nothing an agent chose). HTML artifacts are never inlined: they open in a sandboxed
frame from the artifact route, whose CSP runs no script (``SAFE_ARTIFACT_HEADERS``). Images are served the same way.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from markupsafe import Markup
from sqlalchemy import Engine

from api.console.drafts import Manifest, is_manifest, manifest_view
from api.console.web import human_size
from api.services.task_reads import open_artifact
from memory.artifact_store import ArtifactStore
from memory.identity.auth import PrincipalContext
from memory.tasks.models import TaskArtifact

INLINE_LIMIT = 256 * 1024
"""Bytes read into a page at most: a larger artifact is a download link (a page stays quick to open)."""
CSV_ROWS = 200
View = Literal["markdown", "html", "image", "json", "manifest", "csv", "text", "download"]
_MARKDOWN = ("text/markdown", "text/x-markdown")


def _image(self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
    """An embedded (``data:``) image as an image; any other is a link, never fetched by the page."""
    token = tokens[idx]
    src = str(token.attrGet("src") or "")
    if src.startswith("data:"):
        return RendererHTML.image(self, tokens, idx, options, env)
    alt = self.renderInlineAsText(token.children or [], options, env) or src
    return f'<a href="{escapeHtml(src)}" rel="noopener noreferrer">{escapeHtml(alt)} (image not loaded)</a>'


def _link_open(self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
    """A link opens without telling the site which task page it came from."""
    tokens[idx].attrSet("rel", "noopener noreferrer")
    return self.renderToken(tokens, idx, options, env)


_markdown = MarkdownIt("js-default", {"html": False})
_markdown.add_render_rule("image", _image)
_markdown.add_render_rule("link_open", _link_open)


@dataclass(frozen=True)
class Table:
    header: list[str]
    rows: list[list[str]]
    """The first :data:`CSV_ROWS` rows after the header."""
    left_out: int


@dataclass(frozen=True)
class Shown:
    """An artifact ready for the ``show`` macro (templates/artifact.html)."""

    artifact: TaskArtifact
    """Its row: name, step, media type, size, sha256."""
    url: str
    """Its bytes through the console's artifact route (the image's ``src``, the frame's, the download's)."""
    view: View
    body: Markup | str | Table | Manifest | None = None
    """By view: ``markdown``, markdown-it's output (raw HTML off: the one artifact-derived markup marked safe);
    ``json`` (pretty-printed) and ``text``, a string shown escaped; ``csv``, a :class:`Table`; ``manifest``, what
    it names. Nothing for the views served from the artifact route."""
    note: str | None = None
    """Why it is shown as it is (too large, not valid JSON, ...)."""

    @property
    def manifest(self) -> Manifest | None:
        return self.body if isinstance(self.body, Manifest) else None


def base_type(media_type: str) -> str:
    """``Text/CSV; charset=utf-8`` → ``text/csv``."""
    return media_type.split(";", 1)[0].strip().lower()


def render(engine: Engine, store: ArtifactStore, principal: PrincipalContext, task_id: str, sha256: str) -> Shown:
    """The artifact ``sha256`` of the task, read through the API's gate (another's task or artifact is a 404)."""
    row, chunks = open_artifact(engine, store, principal, task_id, sha256)

    def shown(view: View, **more: Any) -> Shown:
        return Shown(artifact=row, url=f"/console/tasks/{task_id}/artifacts/{row.sha256}", view=view, **more)

    media = base_type(row.media_type)
    if media == "text/html":
        return shown("html")
    if media.startswith("image/"):
        return shown("image")
    if not (media in (*_MARKDOWN, "text/csv", "text/plain", "application/json") or media.endswith("+json")):
        return shown("download", note=f"{row.media_type} is not shown here")
    if row.size_bytes > INLINE_LIMIT:
        return shown("download", note=f"{human_size(row.size_bytes)} is too large to show here "
                                      f"(at most {human_size(INLINE_LIMIT)})")
    text = b"".join(chunks).decode("utf-8", errors="replace")
    if media in _MARKDOWN:
        return shown("markdown", body=Markup(_markdown.render(text)))
    if media == "text/csv":
        return _table(text, shown)
    if media == "text/plain":
        return shown("text", body=text)
    try:
        body = json.loads(text)
    except ValueError:
        return shown("text", body=text, note="not valid JSON: shown as text")
    if is_manifest(body):
        return shown("manifest", body=manifest_view(engine, store, principal, task_id, body))
    return shown("json", body=json.dumps(body, indent=2, ensure_ascii=False))


def _table(text: str, shown: Callable[..., Shown]) -> Shown:
    """The header row and the first :data:`CSV_ROWS` rows, saying how many more there are."""
    try:
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as exc:
        return shown("text", body=text, note=f"not a table CSV can read ({exc}): shown as text")
    header, body = (rows[0], rows[1:]) if rows else ([], [])
    return shown("csv", body=Table(header, body[:CSV_ROWS], max(len(body) - CSV_ROWS, 0)))
