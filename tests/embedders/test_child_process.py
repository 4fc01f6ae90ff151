"""The engine's child starts as ``python -m memory.embedders.child`` cleanly: nothing on stderr (the worker's log is
JSON lines, and a runpy warning there broke it when the package imported the child's own module)."""

from __future__ import annotations

import subprocess
import sys

from memory.embedders import wire


def test_the_child_announces_itself_and_exits_with_its_stdin_saying_nothing_else() -> None:
    run = subprocess.run([sys.executable, "-W", "error", "-m", "memory.embedders.child"], input=b"",
                         capture_output=True, timeout=120, check=True)
    assert run.stderr == b""
    assert run.stdout[:1] == wire.READY and wire.U32.unpack(run.stdout[1:5])[0] == 384
