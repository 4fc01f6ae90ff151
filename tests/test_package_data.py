"""Every file mnemo reads at run time from its own packages is shipped in the wheel: a file beside the code that
no ``[tool.setuptools.package-data]`` glob names is missing from an installed mnemo (the console's script was)."""

from __future__ import annotations

import tomllib
from fnmatch import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_non_python_file_in_a_package_is_package_data() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    globs: dict[str, list[str]] = config["package-data"]
    top = [pattern.rstrip("*") for pattern in config["packages"]["find"]["include"]]
    unshipped = []
    for name in top:
        for path in sorted((ROOT / name).rglob("*")):
            if not path.is_file() or path.suffix in (".py", ".pyc") or "__pycache__" in path.parts:
                continue
            relative = path.relative_to(ROOT)
            owners = [(package, relative.relative_to(Path(*package.split(".")))) for package in globs
                      if relative.is_relative_to(Path(*package.split(".")))]
            if not any(fnmatch(str(inside), pattern) for package, inside in owners for pattern in globs[package]):
                unshipped.append(str(relative))
    assert unshipped == [], f"add these to [tool.setuptools.package-data] in pyproject.toml: {unshipped}"
