"""Render a bundle as prompt text: sections, with provenance and score on every hit; nothing when empty.

Recalled memories are historical material with sources, not instructions, so
they sit in their own tagged section and their text is escaped.
"""

from __future__ import annotations

from typing import Any
from xml.sax.saxutils import escape, quoteattr


def _attrs(**values: Any) -> str:
    return "".join(f" {k}={quoteattr(str(v))}" for k, v in values.items() if v is not None)


def is_empty(bundle: dict[str, Any]) -> bool:
    return not (
        bundle["items"] or bundle["knowledge"] or bundle["request_constraints"] or bundle["task_state"]
        or bundle["warnings"] or bundle["conflicts"]
    )


def render(bundle: dict[str, Any]) -> str:
    if is_empty(bundle):
        return ""
    out = [f"<memory_bundle{_attrs(snapshot_revision=bundle['snapshot_revision'], intent=bundle['intent'])}>"]
    if bundle["request_constraints"]:
        out.append("<request_constraints>")
        out += [
            f"<constraint{_attrs(key=c['key'])}>{escape(c['value'])}</constraint>"
            for c in bundle["request_constraints"]
        ]
        out.append("</request_constraints>")
    if bundle["effective_preferences"]:
        out.append("<effective_preferences>")
        out += [
            f"<preference{_attrs(key=k, source=bundle['preference_sources'][k]['source'])}>{escape(v)}</preference>"
            for k, v in sorted(bundle["effective_preferences"].items())
        ]
        out.append("</effective_preferences>")
    task = bundle["task_state"]
    if task:
        attrs = _attrs(
            task_id=task["task_id"], status=task["status"], current_step=task.get("current_step_id"),
            state_version=task["state_version"],
        )
        out.append(f"<task_state{attrs}/>")
    if bundle["warnings"]:
        out.append("<warnings>")
        out += [f"<warning>{escape(w)}</warning>" for w in bundle["warnings"]]
        out.append("</warnings>")
    for section in ("knowledge", "items"):
        if not bundle[section]:
            continue
        out.append(f"<{'knowledge' if section == 'knowledge' else 'memories'}>")
        for item in bundle[section]:
            attrs = _attrs(
                id=item["memory_id"], version=item["version"], category=item["category"],
                source=",".join(item["source_refs"]), score=f"{item['score']:.3f}",
            )
            out.append(f"<memory{attrs}>{escape(item['content'])}</memory>")
        out.append(f"</{'knowledge' if section == 'knowledge' else 'memories'}>")
    for conflict in bundle["conflicts"]:
        out.append(f"<conflict{_attrs(key=conflict['key'], status=conflict['status'])}>")
        for c in conflict["candidates"]:
            claim = escape(str(c.get("content", c.get("value"))))
            out.append(f"<claim{_attrs(id=c['memory_id'], version=c['version'])}>{claim}</claim>")
        out.append("</conflict>")
    out.append("</memory_bundle>")
    return "\n".join(out)
