"""The ``mnemo`` command line (the console script ``mnemo = "api.cli:main"``).

One module per command group: :mod:`api.cli.app` assembles them. The API-client commands (``task``, ``session``,
``policy``) share one set of connection options (:mod:`api.cli.options`) over :mod:`api.cli.http`; the commands
that run the stack or reach its database directly find it through :mod:`api.cli.database`.
"""

from __future__ import annotations


def main() -> None:
    """Run ``mnemo``. The app is imported here, not at the top: :mod:`api.cli.hints`, which the dev stack
    imports, should not load every command with it."""
    from api.cli.app import app

    app()
