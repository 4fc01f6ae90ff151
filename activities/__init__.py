"""Temporal activities: thin adapters from workflows to ``memory/`` and the outside world."""
