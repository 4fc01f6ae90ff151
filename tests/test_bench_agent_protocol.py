"""bench/agent_protocol.py registers its definitions over REST on a fresh stack: a body mnemo refused, or a compute
step naming a function its worker's module does not declare, would only show minutes into a run. Checked here as
the API and the worker check them, in a process of its own (loading a task module changes the process's registry).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

CHECK = """
import json
from bench.agent_protocol import AGENT_TYPE, DATA_DEFINITION, DATA_TYPE, agent_definition
from memory.tasks import registry
from memory.tasks.definitions import from_body

registry.load(["bench.task_steps"])
steps = {}
for task_type, body in ((AGENT_TYPE, agent_definition(3)), (DATA_TYPE, DATA_DEFINITION)):
    steps[task_type] = [[s.step_id, s.kind, registry.has_function(s.spec["function"]) if s.kind == "compute" else None]
                        for s in from_body(task_type, body).steps]
print(json.dumps(steps))
"""


def test_the_bench_definitions_are_accepted_and_their_functions_are_declared() -> None:
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", CHECK], cwd=root, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "bench-agent": [["a1", "agent", None], ["a2", "agent", None], ["a3", "agent", None],
                        ["tally", "compute", True], ["review", "approval", None], ["archive", "publish", None]],
        "bench-data": [["prepare", "compute", True], ["report", "compute", True],
                       ["review", "approval", None], ["archive", "publish", None]],
    }
