"""What ``mnemo dev`` shows a newcomer, through the real API: a memory written and recalled, a session committed
(:mod:`.session`), and a report task run up to its approval (:mod:`.task`)."""

from __future__ import annotations

import httpx

from api.cli.demo.memory import memory_demo
from api.cli.demo.session import session_demo
from api.cli.demo.task import run_task_demo
from api.devstack.stack import DemoContext


def run_demo(context: DemoContext) -> None:
    headers = {"Authorization": f"Bearer {context.admin_key}"}
    try:
        with httpx.Client(base_url=context.api_url, headers=headers, timeout=10) as client:
            memory_demo(client)
            session_demo(client, data_dir=context.data_dir)
    except httpx.HTTPError as exc:  # e.g. Ctrl-C while it runs: one line, not a traceback
        print(f"demo: the memory and session demo stopped: {exc}")
        return
    run_task_demo(context.api_url, context.admin_key, approver_key=context.approver_key_path,
                  data_dir=context.data_dir)
