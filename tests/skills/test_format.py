"""SKILL.md parsing is strict: every problem a typed 422-to-be naming the file and the field (issue 27, item 5)."""

from __future__ import annotations

import pytest

from memory.errors import InvalidInput
from memory.skills.format import MAX_FILE_BYTES, MAX_FILES, check_name, parse_tree
from memory.skills.system import ROOT, system_skills

GOOD = """---
name: weekly-note
version: "2.1.0"
description: Write the team's weekly note.
tools: [search, draft]
constraints:
  - Never name customers.
---

## Role
An editor.

## STRATEGY
Short paragraphs.

## Prompt Template
Week {week}.

## examples
One.
"""


def refusal(files: dict[str, str]) -> InvalidInput:
    with pytest.raises(InvalidInput) as caught:
        parse_tree(files)
    return caught.value


def test_a_complete_skill_md_sets_every_field_and_headings_are_case_insensitive() -> None:
    tree = parse_tree({"SKILL.md": GOOD, "examples/a.md": "kept  verbatim\n"})
    assert (tree.name, tree.declared_version) == ("weekly-note", "2.1.0")
    assert dict(tree.fields) == {"description": "Write the team's weekly note.", "tools": ("search", "draft"),
                                 "constraints": ("Never name customers.",), "role": "An editor.",
                                 "strategy": "Short paragraphs.", "prompt_template": "Week {week}.",
                                 "examples": "One."}
    assert tree.files["examples/a.md"] == "kept  verbatim\n"
    assert set(tree.manifest) == {"SKILL.md", "examples/a.md"} and len(tree.tree_sha256) == 64


def test_an_overlay_may_set_only_some_fields_and_a_missing_section_is_absent() -> None:
    tree = parse_tree({"SKILL.md": "---\nname: weekly-note\nversion: '3'\n---\n## Strategy\nBullets only.\n"})
    assert dict(tree.fields) == {"strategy": "Bullets only."}


@pytest.mark.parametrize(("text", "code", "field"), [
    ("## Role\nno front matter\n", "skill_front_matter_missing", None),
    ("---\nname: [unclosed\n---\n## Role\nx\n", "invalid_skill_yaml", None),
    ("---\n- a list\n---\n## Role\nx\n", "invalid_skill_yaml", None),
    ("---\nversion: '1'\n---\n## Role\nx\n", "missing_skill_field", "name"),
    ("---\nname: a\n---\n## Role\nx\n", "missing_skill_field", "version"),
    ("---\nname: Weekly Note\nversion: '1'\n---\n## Role\nx\n", "invalid_skill_name", "name"),
    ("---\nname: a\nversion: 1.2\n---\n## Role\nx\n", "invalid_skill_field", "version"),
    ("---\nname: a\nversion: '1'\ndescription: ''\n---\n", "invalid_skill_field", "description"),
    ("---\nname: a\nversion: '1'\ntools: search\n---\n", "invalid_skill_field", "tools"),
    ("---\nname: a\nversion: '1'\nconstraints: [1, 2]\n---\n", "invalid_skill_field", "constraints"),
    ("---\nname: a\nversion: '1'\nauthor: me\n---\n## Role\nx\n", "unknown_skill_field", "author"),
    ("---\nname: a\nversion: '1'\n---\n## Role\nx\n## Notes\ny\n", "unknown_skill_section", "Notes"),
    ("---\nname: a\nversion: '1'\n---\n## Role\nx\n## role\ny\n", "duplicate_skill_section", "role"),
    ("---\nname: a\nversion: '1'\n---\n## Role\n\n## Strategy\ny\n", "empty_skill_section", "role"),
    ("---\nname: a\nversion: '1'\n---\nloose text\n## Role\nx\n", "skill_text_outside_sections", None),
    ("---\nname: a\nversion: '1'\n---\n", "empty_skill", None),
])
def test_each_problem_of_skill_md_is_typed_and_names_the_file_and_field(
    text: str, code: str, field: str | None
) -> None:
    refused = refusal({"SKILL.md": text})
    assert refused.code == code, refused.message
    assert refused.details.get("file") == "SKILL.md" and refused.details.get("field") == field, refused.details


@pytest.mark.parametrize(("files", "code", "file"), [
    ({"README.md": "x"}, "skill_md_missing", "SKILL.md"),
    ({"SKILL.md": GOOD, "../escape.md": "x"}, "invalid_skill_path", "../escape.md"),
    ({"SKILL.md": GOOD, "/etc/passwd": "x"}, "invalid_skill_path", "/etc/passwd"),
    ({"SKILL.md": GOOD, ".hidden": "x"}, "invalid_skill_path", ".hidden"),
    ({"SKILL.md": GOOD, "big.md": "x" * (MAX_FILE_BYTES + 1)}, "skill_too_large", "big.md"),
    ({"SKILL.md": GOOD, **{f"e/{n}.md": "x" for n in range(MAX_FILES)}}, "skill_too_large", "."),
    ({"SKILL.md": GOOD, **{f"e/{n}.md": "x" * 60_000 for n in range(5)}}, "skill_too_large", "."),
])
def test_the_directory_is_bounded_and_its_paths_relative(files: dict[str, str], code: str, file: str) -> None:
    refused = refusal(files)
    assert (refused.code, refused.details["file"]) == (code, file), refused.message


def test_the_shipped_system_skills_parse_complete_and_are_read_from_their_files() -> None:
    shipped = system_skills()
    assert {"monthly-report", "incident-digest"} <= set(shipped)
    for name, tree in shipped.items():
        assert tree.name == name and {"description", "role", "strategy", "prompt_template"} <= set(tree.fields)
        assert tree.files["SKILL.md"] == (ROOT / name / "SKILL.md").read_text(encoding="utf-8")
    assert "examples/entry.md" in shipped["incident-digest"].files


@pytest.mark.parametrize("name", ["digest\n", "digest\n\n"])
def test_a_name_with_a_trailing_newline_is_refused(name: str) -> None:
    """``$`` also matches before a final newline: names and paths are matched whole."""
    with pytest.raises(InvalidInput) as refused:
        check_name(name)
    assert refused.value.code == "invalid_skill_name"
