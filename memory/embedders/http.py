"""What the embedding and rerank clients share: one POST to a model endpoint, its failures as typed errors."""

from __future__ import annotations

import json
from collections.abc import Container
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from memory.embedders.base import EmbeddingResponseInvalid
from memory.embedders.engine import EmbeddingUnavailable
from memory.errors import MnemoError


def shown(url: str) -> str:
    """``url`` without a ``user:password@`` part: it is quoted in errors and warnings."""
    parts = urlsplit(url)
    if parts.hostname is None:
        return url
    return urlunsplit(parts._replace(netloc=parts.hostname + (f":{parts.port}" if parts.port else "")))


def post_json(
    client: httpx.Client, url: str, body: dict[str, Any], api_key: str | None, what: str,
    unavailable: type[MnemoError] = EmbeddingUnavailable, invalid: type[MnemoError] = EmbeddingResponseInvalid,
) -> Any:
    """The decoded JSON answer of ``POST url``.

    Unreachable, timed out, 429 or 5xx: ``unavailable`` (may pass). Any other refusal is a configuration
    mistake and says so (same class, code ``model_endpoint_refused``). A 200 that is not JSON: ``invalid``.
    """
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        response = client.post(url, json=body, headers=headers)
    except httpx.TimeoutException as exc:
        raise unavailable(f"the {what} at {shown(url)} did not answer in time ({type(exc).__name__})") from exc
    except httpx.HTTPError as exc:
        raise unavailable(f"the {what} at {shown(url)} is unreachable ({type(exc).__name__}: {exc})") from exc
    if response.status_code == 429 or response.status_code >= 500:
        raise unavailable(f"the {what} at {shown(url)} answered HTTP {response.status_code}")
    if response.status_code != 200:
        raise unavailable(
            f"the {what} at {shown(url)} refused the request with HTTP {response.status_code}: check its URL, "
            "model name and API key", code="model_endpoint_refused",
        )
    try:
        return json.loads(response.content)
    except ValueError as exc:
        raise invalid(f"the {what} at {shown(url)} answered something that is not JSON") from exc


def is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def distinct_index(item: object, count: int, seen: Container[int]) -> int | None:
    """An answer item's ``index`` when it names one of the ``count`` inputs not yet seen; None otherwise.

    Embeddings and rerank answers both point back at their inputs this way, and both refuse the whole
    answer when an item does not.
    """
    index = item.get("index") if isinstance(item, dict) else None
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < count or index in seen:
        return None
    return index
