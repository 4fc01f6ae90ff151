"""Report types: what a report is, apart from the task engine that runs it.

- :mod:`memory.reports.monthly`: the monthly sales report, declared on the public SDK (:mod:`memory.tasks.sdk`)
  like any team's own task type.
- :mod:`memory.reports.sales`: the sales table it reads, the seeded sample dataset and its rates.

The engine (``memory.tasks``, ``activities/tasks``, ``workflows/report_task.py``) knows only step kinds.
"""

MONTHLY_REPORT = "monthly-report"
"""The monthly report's task type (named here so that clients need not import its steps and matplotlib)."""
