"""SYSTEM skills: directories shipped in this package (``system/<name>/SKILL.md``), read from the files at request
time and never copied into a tenant's tables or a user's memories (seed 004 P10, §11: skills are files).

Reading is cached by each file's size and mtime, so an upgrade of mnemo's files is seen without a restart.
"""

from __future__ import annotations

import threading
from pathlib import Path

from memory.skills.format import SkillTree, parse_tree

ROOT = Path(__file__).resolve().parent / "system"

_lock = threading.Lock()
_cache: dict[Path, tuple[tuple[tuple[str, int, int], ...], SkillTree]] = {}


def _files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def _read(directory: Path) -> SkillTree:
    files = _files(directory)
    signature = tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in files)
    with _lock:
        cached = _cache.get(directory)
        if cached is not None and cached[0] == signature:
            return cached[1]
    tree = parse_tree({p.relative_to(directory).as_posix(): p.read_text(encoding="utf-8") for p in files})
    if tree.name != directory.name:
        raise ValueError(f"system skill {directory.name}: its SKILL.md names {tree.name!r}")  # mnemo's own bug
    with _lock:
        _cache[directory] = (signature, tree)
    return tree


def system_skills(root: Path = ROOT) -> dict[str, SkillTree]:
    """Every shipped skill by name."""
    return {d.name: _read(d) for d in sorted(root.iterdir()) if d.is_dir() and (d / "SKILL.md").is_file()}
