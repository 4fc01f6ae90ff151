"""Metrics, traces and logs of the API and the worker (README: "Observability")."""
