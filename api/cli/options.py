"""The options ``mnemo`` commands share, declared once.

Every API-client command (``mnemo task …``, ``mnemo session …``, ``mnemo policy …``) takes the same five:
``--api-url``, ``--key``, ``--key-file``, ``--data-dir`` and ``--json``. Typer has no dependency injection for
options, and a group callback would move them before the subcommand (``mnemo task --key X list``), so
:func:`api_client` adds them to the command's own signature instead: they stay after the subcommand, in every
command's ``--help``, and the command receives one resolved :class:`Client`.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from api.cli.hints import DEFAULT_DATA_DIR
from api.cli.http import Connection, connection
from api.cli.output import print_answer

StackDataDir = Annotated[
    Path, typer.Option("--data-dir", envvar="MNEMO_DATA_DIR", help="Data directory of the embedded stack.")
]
"""``--data-dir`` of the commands that run the stack or reach its database directly."""

ApiUrl = Annotated[
    str | None,
    typer.Option(
        "--api-url", envvar="MNEMO_API_URL",
        help="mnemo API base URL (default: MNEMO_API_HOST:PORT if set, else the running `mnemo dev` of --data-dir).",
    ),
]
Key = Annotated[str | None, typer.Option("--key", envvar="MNEMO_API_KEY", help="API key (mnemo_...).")]
KeyFile = Annotated[
    Path | None, typer.Option("--key-file", help="File holding the API key (default: <data-dir>/admin.key).")
]
ClientDataDir = Annotated[
    Path, typer.Option("--data-dir", envvar="MNEMO_DATA_DIR", help="Data dir of a running `mnemo dev`.")
]
Json = Annotated[bool, typer.Option("--json", help="Print the API's JSON answer.")]

CLIENT_OPTIONS = tuple(
    inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)
    for name, annotation, default in (
        ("api_url", ApiUrl, None),
        ("key", Key, None),
        ("key_file", KeyFile, None),
        ("data_dir", ClientDataDir, DEFAULT_DATA_DIR),
        ("as_json", Json, False),
    )
)
"""The five options, in the order ``--help`` lists them, after the command's own."""


@dataclass(frozen=True)
class Client:
    """What an API-client command's five options resolve to: the API and its key, the data dir (for hints) and
    whether to print JSON."""

    conn: Connection
    data_dir: Path
    as_json: bool

    def call(self, method: str, path: str, *, missing_ok: bool = False, **kwargs: Any) -> Any:
        return self.conn.call(method, path, missing_ok=missing_ok, **kwargs)

    def answer(self, data: Any, render: Callable[[Any], str]) -> None:
        print_answer(data, self.as_json, render)


def api_client(command: Callable[..., None]) -> Callable[..., None]:
    """``command`` with the five client options appended to its parameters; its keyword-only ``client``
    parameter receives them resolved (the key is read before the command runs, as every command did)."""
    own = [p for p in inspect.signature(command, eval_str=True).parameters.values() if p.name != "client"]
    parameters = [*own, *CLIENT_OPTIONS]

    @functools.wraps(command)
    def run(
        *args: Any, api_url: str | None, key: str | None, key_file: Path | None, data_dir: Path, as_json: bool,
        **kwargs: Any,
    ) -> None:
        client = Client(connection(api_url, key, key_file, data_dir), data_dir, as_json)
        command(*args, client=client, **kwargs)

    run.__signature__ = inspect.Signature(parameters, return_annotation=None)  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": None}
    return run
