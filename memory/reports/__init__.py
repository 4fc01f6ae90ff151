"""Report types: what a report is, apart from the task engine that runs it.

- :mod:`memory.reports.definitions`: each type's step list (plain data the workflow reads).
- :mod:`memory.tasks.contract`: what a step implementation receives and returns.
- :mod:`memory.reports.registry`: (task type, step id) → implementation.
- :mod:`memory.reports.monthly`: the monthly sales report's steps.
- :mod:`memory.reports.sales`: the sales table it reads, the seeded sample dataset and its rates.

The engine (``memory.tasks``, ``activities/tasks``, ``workflows/report_task.py``) knows only step
kinds; a new report type adds a definition, its steps and one line in the registry.
"""
