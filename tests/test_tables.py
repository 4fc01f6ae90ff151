"""memory.tables names every table: importing every module of the project registers no table it left out (Alembic's
``env.py`` and the migrations test read its metadata alone)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import importlib, json, pkgutil, sys
import memory.tables
listed = set(memory.tables.metadata.tables)
for root in ("memory", "api", "activities", "workflows"):
    package = importlib.import_module(root)
    for module in pkgutil.walk_packages(package.__path__, root + "."):
        if not module.name.endswith(("__main__", ".child")):
            importlib.import_module(module.name)
print(json.dumps({"listed": sorted(listed), "all": sorted(memory.tables.metadata.tables)}))
"""


def test_every_mapped_table_is_registered_by_memory_tables_alone() -> None:
    run = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         check=True)
    found = json.loads(run.stdout.strip().splitlines()[-1])
    assert set(found["all"]) - set(found["listed"]) == set()
    assert {"memories", "console_sessions", "artifact_objects", "session_commits", "tasks"} <= set(found["listed"])
