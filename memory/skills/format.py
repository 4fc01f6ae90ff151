"""A skill directory as data: ``SKILL.md`` (YAML front matter, then markdown sections) and its extra files.

Parsing is strict because a skill steers an agent: every problem is an :class:`~memory.errors.InvalidInput` whose
``details`` name the file and the field, never a default that silently changes what the agent is told.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from memory.errors import InvalidInput

SKILL_FILE = "SKILL.md"
NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
PATH = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}(/[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}){0,3}$")
MAX_FILE_BYTES = 64 * 1024
MAX_FILES = 32
MAX_TREE_BYTES = 256 * 1024
MAX_LIST_ITEMS = 50
MAX_ITEM_CHARS = 500

LIST_FIELDS = ("tools", "constraints")
FRONT_MATTER = ("name", "version", "description", *LIST_FIELDS)
SECTIONS = {"role": "role", "strategy": "strategy", "prompt template": "prompt_template", "examples": "examples"}
"""A body heading (case-insensitive) and the field it fills."""
FIELDS = ("description", "role", "strategy", "constraints", "tools", "prompt_template", "examples")
"""The fields a layer may set, in the order a prompt reads them (``name`` and ``version`` identify the layer)."""

FieldValue = str | tuple[str, ...]
_FENCE = re.compile(r"\A---[ \t]*\r?\n(.*?)^---[ \t]*\r?$\n?", re.S | re.M)
_HEADING = re.compile(r"^##[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)


@dataclass(frozen=True)
class SkillTree:
    """One pushed (or shipped) directory: the parsed ``SKILL.md`` and every file's text, verbatim."""

    name: str
    declared_version: str
    fields: Mapping[str, FieldValue]
    """Only the fields this layer sets."""
    files: Mapping[str, str]

    @property
    def manifest(self) -> dict[str, str]:
        """Relative path → sha256 of its UTF-8 bytes: what is stored, and what the tree hash covers."""
        return {path: sha256(text) for path, text in sorted(self.files.items())}

    @property
    def tree_sha256(self) -> str:
        return sha256(json.dumps(self.manifest, sort_keys=True, separators=(",", ":")))


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _refuse(code: str, message: str, file: str, field: str | None = None) -> InvalidInput:
    details = {"file": file} if field is None else {"file": file, "field": field}
    return InvalidInput(message, code=code, details=details)


def check_name(name: str, file: str = SKILL_FILE) -> str:
    if not NAME.fullmatch(name):
        raise _refuse("invalid_skill_name", f"skill name {name!r} must be lowercase letters, digits and hyphens, "
                                            "starting with a letter or digit, at most 64 characters", file, "name")
    return name


def _text(meta: Mapping[str, Any], key: str) -> str | None:
    value = meta.get(key)
    if value is None and key not in meta:
        return None
    if not isinstance(value, str) or not value.strip():
        raise _refuse("invalid_skill_field", f"front matter {key!r} must be a non-empty string; quote a version "
                                             'such as "1.2" so YAML does not read it as a number', SKILL_FILE, key)
    return value.strip()


def _strings(meta: Mapping[str, Any], key: str) -> tuple[str, ...] | None:
    if key not in meta:
        return None
    value = meta[key]
    if (not isinstance(value, list) or len(value) > MAX_LIST_ITEMS
            or not all(isinstance(item, str) and item.strip() and len(item) <= MAX_ITEM_CHARS for item in value)):
        raise _refuse("invalid_skill_field", f"front matter {key!r} must be a list of at most {MAX_LIST_ITEMS} "
                                             f"non-empty strings of at most {MAX_ITEM_CHARS} characters",
                      SKILL_FILE, key)
    return tuple(item.strip() for item in value)


def _front_matter(text: str) -> tuple[dict[str, Any], str]:
    fence = _FENCE.match(text)
    if fence is None:
        raise _refuse("skill_front_matter_missing", "SKILL.md must start with YAML front matter between two '---' "
                                                    "lines (name, version, ...)", SKILL_FILE)
    try:
        meta = yaml.safe_load(fence.group(1))
    except yaml.YAMLError as exc:
        raise _refuse("invalid_skill_yaml", f"the front matter is not valid YAML: {exc}", SKILL_FILE) from None
    if not isinstance(meta, dict):
        raise _refuse("invalid_skill_yaml", "the front matter must be a YAML mapping of fields", SKILL_FILE)
    unknown = sorted(str(key) for key in meta if key not in FRONT_MATTER)
    if unknown:
        raise _refuse("unknown_skill_field", f"unknown front matter fields {unknown}; allowed: {list(FRONT_MATTER)}",
                      SKILL_FILE, unknown[0])
    return meta, text[fence.end():]


def _sections(body: str) -> dict[str, str]:
    """Each ``## Heading`` and its text; text before the first heading, an unknown or a repeated heading refused."""
    headings = list(_HEADING.finditer(body))
    preamble = body[: headings[0].start()] if headings else body
    if preamble.strip():
        raise _refuse("skill_text_outside_sections", "every line of SKILL.md's body must be under a '## Role', "
                                                     "'## Strategy', '## Prompt template' or '## Examples' heading",
                      SKILL_FILE)
    found: dict[str, str] = {}
    unknown = [h.group(1) for h in headings if h.group(1).casefold() not in SECTIONS]
    if unknown:
        raise _refuse("unknown_skill_section", f"unknown sections {unknown}; allowed: Role, Strategy, Prompt "
                                               "template, Examples", SKILL_FILE, unknown[0])
    for n, heading in enumerate(headings):
        field = SECTIONS[heading.group(1).casefold()]
        if field in found:
            raise _refuse("duplicate_skill_section", f"the section {heading.group(1)!r} appears twice", SKILL_FILE,
                          field)
        end = headings[n + 1].start() if n + 1 < len(headings) else len(body)
        content = body[heading.end():end].strip()
        if not content:
            raise _refuse("empty_skill_section", f"the section {heading.group(1)!r} is empty: fill it or leave the "
                                                 "heading out", SKILL_FILE, field)
        found[field] = content
    return found


def parse_skill_md(text: str) -> tuple[str, str, dict[str, FieldValue]]:
    """The name, the declared version and the fields ``SKILL.md`` sets."""
    meta, body = _front_matter(text)
    name, version = _text(meta, "name"), _text(meta, "version")
    if name is None:
        raise _refuse("missing_skill_field", "front matter needs 'name'", SKILL_FILE, "name")
    if version is None:
        raise _refuse("missing_skill_field", "front matter needs 'version' (a string, e.g. \"1.0.0\")", SKILL_FILE,
                      "version")
    fields: dict[str, FieldValue] = {}
    description = _text(meta, "description")
    if description is not None:
        fields["description"] = description
    for key in LIST_FIELDS:
        items = _strings(meta, key)
        if items is not None:
            fields[key] = items
    fields |= _sections(body)
    if not fields:
        raise _refuse("empty_skill", "SKILL.md sets no field besides name and version", SKILL_FILE)
    return check_name(name), version, fields


def _check_files(files: Mapping[str, str]) -> None:
    if len(files) > MAX_FILES:
        raise _refuse("skill_too_large", f"a skill holds at most {MAX_FILES} files, not {len(files)}", ".")
    total = 0
    for path, text in files.items():
        if not PATH.fullmatch(path) or ".." in path.split("/"):
            raise _refuse("invalid_skill_path", f"{path!r} is not a relative path of letters, digits, '.', '_', '-' "
                                                "(at most 4 levels, no '..', no leading '.')", path)
        size = len(text.encode("utf-8"))
        if size > MAX_FILE_BYTES:
            raise _refuse("skill_too_large", f"{path} is {size} bytes; a file holds at most {MAX_FILE_BYTES}", path)
        total += size
    if total > MAX_TREE_BYTES:
        raise _refuse("skill_too_large", f"the skill's files hold {total} bytes; at most {MAX_TREE_BYTES}", ".")
    if SKILL_FILE not in files:
        raise _refuse("skill_md_missing", "a skill directory must hold SKILL.md at its top", SKILL_FILE)


def parse_tree(files: Mapping[str, str]) -> SkillTree:
    """A directory as ``{relative path: text}``: bounded, its ``SKILL.md`` parsed, every file kept verbatim."""
    _check_files(files)
    name, version, fields = parse_skill_md(files[SKILL_FILE])
    return SkillTree(name, version, fields, dict(files))
