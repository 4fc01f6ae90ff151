"""Report types: their step lists (definitions) and step implementations (the registry).

The task engine (``workflows/report_task.py`` and ``activities/tasks.py``) knows
only step kinds; a new report type registers a definition and its steps here.
"""
