"""The root ``mnemo`` app: the stack and service commands, then one group per module of :mod:`api.cli`.

The order of registration is the order ``mnemo --help`` lists them in.
"""

from __future__ import annotations

import typer

from api.cli import artifacts, backup, importer, services
from api.cli.admin import admin_app
from api.cli.keys import keys_app
from api.cli.knowledge import knowledge_app
from api.cli.mcp import mcp_app
from api.cli.policy import policy_app
from api.cli.session import session_app
from api.cli.skills import skills_app
from api.cli.task import task_app

app = typer.Typer(help="mnemo: governed memory and durable tasks for AI agents.", no_args_is_help=True)
for command in (services.dev, services.migrate, services.worker, services.api, backup.backup, backup.restore):
    app.command()(command)
app.command(name="import-artifacts")(artifacts.import_artifacts)
app.command(name="import")(importer.import_command)
for group, name in (
    (keys_app, "keys"), (admin_app, "admin"), (task_app, "task"), (session_app, "session"), (mcp_app, "mcp"),
    (policy_app, "policy"), (skills_app, "skills"), (knowledge_app, "knowledge"),
):
    app.add_typer(group, name=name)
