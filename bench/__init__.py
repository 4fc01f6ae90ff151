"""mnemo's benchmarks: each module prints its figures; run one from the repository root as
``.venv/bin/python -m bench.<name>`` (see docs/benchmarks.md). Shared machinery is in :mod:`bench.harness`,
the synthetic texts in :mod:`bench.corpus`."""
