"""``mnemo keys …``: create, list, revoke and rotate API keys, straight on the database (keys are global rows)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from api.cli.database import service_settings
from api.cli.hints import DEFAULT_DATA_DIR
from api.cli.options import StackDataDir
from api.cli.output import fail

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from memory.identity.keys import KeyInfo

keys_app = typer.Typer(help="API keys.", no_args_is_help=True)

ExpiresIn = Annotated[
    str | None, typer.Option("--expires-in", help="Lifetime, e.g. 90d, 12h, 1h30m (default: until revoked).")
]


def _cli_actor() -> str:
    """Who the audit log names for a key changed from the command line: the operating-system user."""
    import getpass

    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):
        return f"cli:uid-{os.getuid()}"


@contextmanager
def _keys_session(data_dir: Path) -> Iterator[Session]:
    """A transaction on the database of MNEMO_DATABASE_URL or the running ``mnemo dev`` (keys are global rows)."""
    from memory.db import global_session, make_engine

    engine = make_engine(service_settings(data_dir).require_database_url(), pool_size=1)
    try:
        with global_session(engine) as session:
            yield session
    finally:
        engine.dispose()


def _duration(raw: str | None, what: str) -> timedelta | None:
    """A duration option (90d, 12h, 1h30m), or a one-line error."""
    from memory.errors import MnemoError
    from memory.identity.keys import parse_duration

    if raw is None:
        return None
    try:
        return parse_duration(raw, what)
    except MnemoError as exc:
        fail(exc.message)


@keys_app.command("create")
def keys_create(
    tenant: Annotated[str, typer.Option(help="Tenant id (created if it does not exist).")],
    user: Annotated[str, typer.Option(help="User id the key authenticates as.")],
    roles: Annotated[str, typer.Option(help="Comma-separated roles, e.g. memory_writer,approver.")] = "",
    agent: Annotated[str | None, typer.Option(help="Bind the key to an agent (for AGENT space memories).")] = None,
    expires_in: ExpiresIn = None,
    data_dir: StackDataDir = DEFAULT_DATA_DIR,
) -> None:
    """Create an API key and print it, alone, on stdout. It is shown this once."""
    from memory.db import make_engine, tenant_session
    from memory.errors import MnemoError
    from memory.identity.auth import create_api_key

    lifetime = _duration(expires_in, "--expires-in")
    url = service_settings(data_dir).require_database_url()
    engine = make_engine(url, pool_size=1)
    try:
        with tenant_session(engine, tenant) as session:
            key = create_api_key(
                session, tenant_id=tenant, user_id=user, agent_id=agent, roles=roles.split(",") if roles else [],
                expires_in=lifetime, actor=_cli_actor(),
            )
    except MnemoError as exc:
        fail(exc.message)
    finally:
        engine.dispose()
    sys.stdout.write(key + "\n")


def _key_json(info: KeyInfo) -> dict[str, object]:
    from dataclasses import asdict
    from datetime import datetime

    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in asdict(info).items()}


def _key_rows(found: list[KeyInfo]) -> str:
    """The keys as a table for people: one line each, columns sized to their content."""
    rows = [("KEY ID", "TENANT", "USER", "AGENT", "ROLES", "STATE", "CREATED", "EXPIRES", "REVOKED")]
    for info in found:
        rows.append((
            info.key_id, info.tenant_id, info.user_id, info.agent_id or "-", ",".join(info.roles) or "-", info.state,
            f"{info.created_at:%Y-%m-%d %H:%M}", f"{info.expires_at:%Y-%m-%d %H:%M}" if info.expires_at else "-",
            f"{info.revoked_at:%Y-%m-%d %H:%M}" if info.revoked_at else "-",
        ))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows
    )


@keys_app.command("list")
def keys_list(
    tenant: Annotated[str | None, typer.Option(help="Only this tenant's keys.")] = None,
    user: Annotated[str | None, typer.Option(help="Only this user's keys.")] = None,
    all_keys: Annotated[bool, typer.Option("--all", help="Include revoked and expired keys.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON array, for scripts.")] = False,
    data_dir: StackDataDir = DEFAULT_DATA_DIR,
) -> None:
    """List API keys (ids, identities, roles, state and instants; never a secret)."""
    import json

    from memory.identity.keys import list_keys

    with _keys_session(data_dir) as session:
        found = list_keys(session, tenant_id=tenant, user_id=user, include_inactive=all_keys)
    if as_json:
        typer.echo(json.dumps([_key_json(info) for info in found], indent=2))
        return
    if not found:
        typer.echo("mnemo: no keys" + ("" if all_keys else " in use (--all shows revoked and expired ones)"), err=True)
        return
    typer.echo(_key_rows(found))


@keys_app.command("revoke")
def keys_revoke(
    key: Annotated[str, typer.Argument(help="The key id (or the whole key, e.g. a leaked one).")],
    reason: Annotated[str | None, typer.Option(help="Why, for the audit log.")] = None,
    data_dir: StackDataDir = DEFAULT_DATA_DIR,
) -> None:
    """Revoke a key at once (audited). Revoking a revoked key changes nothing."""
    from memory.errors import MnemoError
    from memory.identity.keys import key_id_of, revoke_key

    try:
        with _keys_session(data_dir) as session:
            info = revoke_key(session, key_id_of(key), actor=_cli_actor(), reason=reason)
    except MnemoError as exc:
        fail(exc.message)
    typer.echo(f"mnemo: key {info.key_id} of {info.tenant_id}/{info.user_id} is revoked")


@keys_app.command("rotate")
def keys_rotate(
    key: Annotated[str, typer.Argument(help="The key id (or the whole key) to replace.")],
    grace: Annotated[
        str | None, typer.Option(help="Keep the old key working this long, e.g. 1h (default: none).")
    ] = None,
    expires_in: ExpiresIn = None,
    data_dir: StackDataDir = DEFAULT_DATA_DIR,
) -> None:
    """Print a new key (alone, on stdout, once) with the old one's identity and roles; revoke the old one."""
    from memory.errors import MnemoError
    from memory.identity.keys import key_id_of, rotate_key

    period = _duration(grace, "--grace") or timedelta(0)
    lifetime = _duration(expires_in, "--expires-in")
    try:
        with _keys_session(data_dir) as session:
            old_id = key_id_of(key)
            secret, info = rotate_key(session, old_id, actor=_cli_actor(), grace=period, expires_in=lifetime)
    except MnemoError as exc:
        fail(exc.message)
    when = "now" if not period else f"in {period}"
    typer.echo(
        f"mnemo: key {info.key_id} replaces {old_id} ({info.tenant_id}/{info.user_id}); {old_id} stops working {when}",
        err=True,
    )
    sys.stdout.write(secret + "\n")
