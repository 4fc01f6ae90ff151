"""How the ``mnemo`` commands that are API clients (``mnemo session``, ``mnemo task``, ``mnemo policy``) connect:
like any other client, over HTTP with an API key. The API is ``--api-url`` (or MNEMO_API_URL), else
``http://MNEMO_API_HOST:MNEMO_API_PORT`` when either is set, else the URL the running ``mnemo dev`` of
``--data-dir`` recorded (so ``mnemo dev --port 21080`` is found), else ``http://127.0.0.1:8000``. The key is ``--key``
(or MNEMO_API_KEY), else the one in ``--key-file`` (default ``<data-dir>/admin.key``, the admin key ``mnemo dev``
writes). Errors end the command as ``mnemo: message (code, HTTP status)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from api.cli.hints import mnemo_hint
from api.cli.output import fail
from api.settings import Settings


@dataclass(frozen=True)
class Connection:
    api_url: str
    key: str

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """The API's response, whatever its status; an API out of reach ends the command."""
        try:
            return httpx.request(
                method, self.api_url + path, headers={"Authorization": f"Bearer {self.key}"}, timeout=60, **kwargs
            )
        except httpx.HTTPError as exc:
            fail(f"cannot reach the API at {self.api_url} ({exc}): start the stack with `{mnemo_hint('dev')}`, "
                 "or pass --api-url with the address of a running API")

    def call(self, method: str, path: str, *, missing_ok: bool = False, **kwargs: Any) -> Any:
        """The API's JSON answer; a 404 is None when ``missing_ok``; any other error ends the command."""
        response = self.request(method, path, **kwargs)
        if response.status_code == 404 and missing_ok:
            return None
        if response.status_code >= 400:
            fail(refusal(response))
        return response.json() if response.content else None  # a 204 (a DELETE) has no body


def refusal(response: httpx.Response) -> str:
    """What a refused request says: ``message (code, HTTP status)``, and every problem of a refused body."""
    try:
        error = response.json()["error"]
        message, code = error["message"], error["code"]
        problems = [problem["message"] for problem in (error.get("details") or {}).get("problems", [])]
    except (ValueError, KeyError, TypeError):
        return f"HTTP {response.status_code}: {response.text[:300]}"
    # Every problem of a refused body, one a line: the fix is then one pass, not one run per problem.
    return (f"{message} ({code}, HTTP {response.status_code})"
            + "".join(f"\n  {line}" for line in problems if len(problems) > 1))


def api_url_of(data_dir: Path) -> str:
    """Where the API is when no URL is given: MNEMO_API_HOST / MNEMO_API_PORT when set, else what the running
    ``mnemo dev`` of ``data_dir`` recorded, else the default address."""
    from api.devstack.stack import running_api_url

    settings = Settings()
    explicit = {"api_host", "api_port"} & settings.model_fields_set
    recorded = None if explicit else running_api_url(data_dir)
    return recorded or f"http://{settings.api_host}:{settings.api_port}"


def connection(api_url: str | None, key: str | None, key_file: Path | None, data_dir: Path) -> Connection:
    """Where the API is and which key to send: the options, else the settings or the running stack, and the key
    file."""
    url = (api_url or api_url_of(data_dir)).rstrip("/")
    if key:
        return Connection(url, key)
    path = key_file or data_dir / "admin.key"
    if not path.is_file():
        fail(f"no API key: {path} does not exist (pass --key or --key-file, or start `{mnemo_hint('dev')}`)")
    secret = path.read_text().strip()
    if not secret:
        fail(f"no API key: {path} is empty")
    return Connection(url, secret)
