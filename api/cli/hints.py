"""How a hint names a ``mnemo`` command, so that pasting it works where the person is."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

DEFAULT_DATA_DIR = Path(".mnemo")


def mnemo_executable() -> str:
    """``mnemo`` when that name on PATH is this installation's; else this installation's script, relative to the
    working directory when it lies under it (``.venv/bin/mnemo``): a newcomer who never activated the venv has
    no ``mnemo`` on PATH."""
    beside = Path(sys.executable).parent / "mnemo"
    found = shutil.which("mnemo")
    if found is not None and (not beside.exists() or Path(found).resolve() == beside.resolve()):
        return "mnemo"
    if not beside.exists():
        return f"{shlex.quote(sys.executable)} -m api.cli"
    return shlex.quote(shown(beside))


def shown(path: Path) -> str:
    """``path`` relative to the working directory when it lies under it, else absolute."""
    absolute = Path(os.path.abspath(path))
    try:
        return str(absolute.relative_to(Path.cwd()))
    except ValueError:
        return str(absolute)


def mnemo_hint(*args: str, data_dir: Path | None = None) -> str:
    """The command line ``mnemo ARGS`` as the person can run it, with ``--data-dir`` unless it is the default."""
    words = [*args]
    if data_dir is not None and Path(os.path.abspath(data_dir)) != Path(os.path.abspath(DEFAULT_DATA_DIR)):
        words += ["--data-dir", shown(data_dir)]
    return " ".join([mnemo_executable(), *(shlex.quote(word) for word in words)])
