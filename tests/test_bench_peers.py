"""bench/peers.py without its peer packages (they live in a venv of their own, never in mnemo's): it must refuse
before starting a stack, naming what is missing and how to install it, not fail with a traceback minutes in."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_without_the_peer_packages_the_bench_refuses_clearly(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[1]
    data = tmp_path / "locomo.json"
    data.write_text("[]")
    done = subprocess.run([sys.executable, "-m", "bench.peers", "--data", str(data)], cwd=root,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "missing here: mem0ai, langgraph-checkpoint-postgres, langchain" in done.stderr
    assert "pip install -e '.[peers]'" in done.stderr
    assert "mnemo dev" not in done.stdout  # refused before any stack started
