"""Render a bundle as prompt text: sections, with provenance and score on every hit; nothing when empty.

Recalled memories are historical material with sources, not instructions, so
they sit in their own tagged section and their text is escaped. Published knowledge (reviewed, versioned
facts) has its own section, distinct from memories: a reader must never mistake a memory for a rule.
"""

from __future__ import annotations

from typing import Any
from xml.sax.saxutils import escape, quoteattr

from memory.knowledge.recall import KnowledgeEntry
from memory.recall.bundle_types import Bundle, BundleItem, Conflict
from memory.recall.skills import BundleSkill
from memory.tasks.resumable import ResumableTask


def _attrs(**values: object) -> str:
    return "".join(f" {k}={quoteattr(str(v))}" for k, v in values.items() if v is not None)


def render(bundle: Bundle) -> str:
    if bundle.is_empty():
        return ""
    out = [f"<memory_bundle{_attrs(snapshot_revision=bundle.snapshot_revision, intent=bundle.plan.intent.value)}>"]
    out += _section("request_constraints", [
        f"<constraint{_attrs(key=c.key)}>{escape(c.value)}</constraint>" for c in bundle.request_constraints
    ])
    out += _section("effective_preferences", [
        f"<preference{_attrs(key=k, source=bundle.preference_sources[k].source)}>{escape(v)}</preference>"
        for k, v in sorted(bundle.effective_preferences.items())
    ])
    task = bundle.task_state
    if task is not None:
        attrs = _attrs(task_id=task.task_id, status=task.status, current_step=task.current_step_id,
                       state_version=task.state_version, published=str(task.published).lower())
        out.append(f"<task_state{attrs}/>")
    out += _section("task_candidates", [_task(t) for t in bundle.task_candidates])
    out += _section("warnings", [f"<warning>{escape(w)}</warning>" for w in bundle.warnings])
    out += _section("skills", [line for skill in bundle.skills.skills for line in _skill(skill)])
    out += _section("knowledge", [_knowledge(entry) for entry in bundle.knowledge], "正式知识 / knowledge")
    out += _section("memories", [_memory(item) for item in bundle.items])
    for conflict in bundle.conflicts:
        out += _conflict(conflict)
    out.append("</memory_bundle>")
    return "\n".join(out)


def step_view(bundle: Bundle) -> dict[str, Any]:
    """The bundle as a task step receives it (JSON, kept in the step's attempt history): ``text`` is what a prompt
    quotes (:func:`render`), ``memories`` the injected ones for code to read, ``trace_id`` the audited recall."""
    return {
        "trace_id": bundle.trace_id,
        "text": render(bundle),
        "memories": [{"memory_id": item.memory_id, "version": item.version, "category": item.category,
                      "key": item.key, "content": item.content, "score": item.score,
                      "source_refs": list(item.source_refs)} for item in bundle.items],
        "knowledge": [{"knowledge_id": k.knowledge_id, "version": k.version, "key": k.key, "claim": k.claim,
                       "authority": k.authority} for k in bundle.knowledge],
        "effective_preferences": dict(bundle.effective_preferences),
        "warnings": list(bundle.warnings),
    }


def _section(tag: str, lines: list[str], title: str | None = None) -> list[str]:
    """``lines`` inside ``<tag>`` (with its ``title``); no section at all when there are none."""
    return [f"<{tag}{_attrs(title=title)}>", *lines, f"</{tag}>"] if lines else []


def _task(task: ResumableTask) -> str:
    attrs = _attrs(task_id=task.task_id, task_type=task.task_type, status=task.status,
                   waiting_reason=task.waiting_reason, updated_at=task.updated_at.isoformat())
    return f"<task{attrs}>{escape(task.goal_summary)}</task>"


def _memory(item: BundleItem) -> str:
    attrs = _attrs(id=item.memory_id, version=item.version, category=item.category,
                   source=",".join(item.source_refs), score=f"{item.score:.3f}")
    return f"<memory{attrs}>{escape(item.content)}</memory>"


def _skill(skill: BundleSkill) -> list[str]:
    """A procedure to follow, each field tagged with the layer it came from; its text escaped like any other."""
    fields = [f"<{f.name}{_attrs(space=f.source.space, version=f.source.version)}>"
              f"{escape(f.value if isinstance(f.value, str) else '; '.join(f.value))}</{f.name}>" for f in skill.fields]
    return [f"<skill{_attrs(name=skill.name, **skill.outcomes)}>", *fields, "</skill>"]


def _knowledge(entry: KnowledgeEntry) -> str:
    scope = entry.scope["type"] if entry.scope["project_id"] is None else f"PROJECT {entry.scope['project_id']}"
    attrs = _attrs(id=entry.knowledge_id, version=entry.version, key=entry.key, authority=entry.authority,
                   scope=scope, valid_to=entry.validity["valid_to"], source=",".join(entry.source_refs),
                   score=f"{entry.score:.3f}")
    return f"<fact{attrs}>{escape(entry.claim)}</fact>"


def _conflict(conflict: Conflict) -> list[str]:
    """Both claims, the fact's content or the preference's value, and neither is used."""
    claims = [
        f"<claim{_attrs(id=c['memory_id'], version=c['version'])}>{escape(str(c.get('content', c.get('value'))))}"
        "</claim>" for c in conflict.candidates
    ]
    return [f"<conflict{_attrs(key=conflict.key, status=conflict.status)}>", *claims, "</conflict>"]
