"""Every file mnemo reads at run time from its own packages is shipped in the wheel: a file beside the code that
no ``[tool.setuptools.package-data]`` glob names is missing from an installed mnemo (the console's script was)."""

from __future__ import annotations

import tomllib
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _setuptools() -> Any:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]


def _shipped(relative: Path, globs: dict[str, list[str]]) -> bool:
    """A glob of a package holding ``relative`` names it."""
    owners = [(package, relative.relative_to(Path(*package.split(".")))) for package in globs
              if relative.is_relative_to(Path(*package.split(".")))]
    return any(fnmatch(str(inside), pattern) for package, inside in owners for pattern in globs[package])


def test_every_non_python_file_in_a_package_is_package_data() -> None:
    config = _setuptools()
    globs: dict[str, list[str]] = config["package-data"]
    top = [pattern.rstrip("*") for pattern in config["packages"]["find"]["include"]]
    unshipped = []
    for name in top:
        for path in sorted((ROOT / name).rglob("*")):
            if not path.is_file() or path.suffix in (".py", ".pyc") or "__pycache__" in path.parts:
                continue
            relative = path.relative_to(ROOT)
            if not _shipped(relative, globs):
                unshipped.append(str(relative))
    assert unshipped == [], f"add these to [tool.setuptools.package-data] in pyproject.toml: {unshipped}"


def test_the_system_skills_and_their_extra_files_are_package_data() -> None:
    """SYSTEM skills are read from their files at request time (memory.skills.system): an installed mnemo without
    them would resolve no SYSTEM layer at all."""
    globs: dict[str, list[str]] = _setuptools()["package-data"]
    system = ROOT / "memory" / "skills" / "system"
    skill_files = sorted(path.relative_to(ROOT) for path in system.glob("*/SKILL.md"))
    assert len(skill_files) >= 2
    assert all(_shipped(path, globs) for path in skill_files), skill_files
    assert _shipped(Path("memory/skills/system/incident-digest/examples/entry.md"), globs)
    assert not _shipped(Path("memory/skills/system/incident-digest/notes.txt"), globs)
