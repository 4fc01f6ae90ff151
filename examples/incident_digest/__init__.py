"""The incident digest: a task type and its agent, written against the REST API alone (README.md here)."""
