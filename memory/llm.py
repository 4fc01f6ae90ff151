"""The one client of an OpenAI-compatible chat-completions endpoint (vLLM, Ollama, a hosted API).

Used by the ``llm`` extractor of session commits and by ``llm`` task steps. An endpoint that cannot answer now
(transport errors, timeouts, 429, 5xx) raises :class:`LlmUnavailable` with ``retryable=True``, for a Temporal
activity to retry with backoff; any other refusal (401, 404, ...) is a configuration mistake and says what to fix.
Nothing an endpoint answers is trusted: callers parse :attr:`Completion.text` strictly.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import urlsplit, urlunsplit

import httpx
from pydantic import BaseModel, Field, ValidationError

BODY_PREVIEW_CHARS = 200
"""How much of a refusing endpoint's body goes to the log. Never into a stored error: endpoints echo the prompt
(a user's messages, a task's goal), and a stored error outlives a deletion of them."""

logger = logging.getLogger(__name__)


def shown(url: str) -> str:
    """The URL without any ``user:password@`` part: it is quoted in errors that are stored."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.hostname + (f":{parts.port}" if parts.port else "")
                                     if parts.hostname else parts.netloc))


@dataclass(frozen=True)
class LlmConfig:
    """Where the model lives: ``MNEMO_LLM_BASE_URL`` (ending in ``/v1``), ``MNEMO_LLM_MODEL``, ``MNEMO_LLM_API_KEY``."""

    base_url: str
    model: str
    api_key: str | None
    timeout_seconds: float = 60.0

    def __post_init__(self) -> None:
        if not re.match(r"https?://[^/\s]+", self.base_url):
            raise ValueError(
                f"MNEMO_LLM_BASE_URL must be an http(s) URL such as http://host:8000/v1, not {self.base_url!r}"
            )
        if not self.model.strip():
            raise ValueError("MNEMO_LLM_MODEL must name the model the endpoint serves")
        if not self.timeout_seconds > 0:
            raise ValueError(f"the LLM timeout must be positive, not {self.timeout_seconds}")


class LlmUnavailable(Exception):
    """The endpoint gave no usable reply; ``retryable`` says whether trying again later can help."""

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


@dataclass(frozen=True)
class Completion:
    """What mnemo reads of a chat completion: the first choice's text (None when the endpoint sent none) and the
    token counts it reported (0 when it reported none)."""

    text: str | None
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


class _Message(BaseModel):
    content: str | None = None


class _Choice(BaseModel):
    message: _Message


class _Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0


class _Answer(BaseModel):
    """The parts of a chat completion mnemo reads; endpoints add fields of their own, which are ignored."""

    choices: Annotated[list[_Choice], Field(min_length=1)]
    usage: _Usage | None = None
    model: str | None = None


def _refusal_advice(status: int, config: LlmConfig, structured: bool) -> str:
    if status in (401, 403):
        return "the endpoint refused the credentials: check MNEMO_LLM_API_KEY"
    if status == 404:
        return (
            f"no such model or path: check MNEMO_LLM_MODEL ({config.model!r}) and that MNEMO_LLM_BASE_URL "
            f"({shown(config.base_url)!r}) ends in /v1"
        )
    return f"the endpoint refused the request: check MNEMO_LLM_MODEL ({config.model!r})" + (
        " and that the endpoint supports response_format json_schema" if structured else "")


def chat(config: LlmConfig, messages: list[dict[str, str]], *, temperature: float = 0.0,
         response_format: dict[str, Any] | None = None, max_tokens: int | None = None,
         client: httpx.Client | None = None) -> Completion | None:
    """POST a chat completion; the parsed answer, None for a 2xx that is not a chat completion, or
    :class:`LlmUnavailable`. ``client`` shares connections (the config's timeout still applies)."""
    body: dict[str, Any] = {"model": config.model, "messages": messages, "temperature": temperature}
    if response_format is not None:
        body["response_format"] = response_format
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    url = config.base_url.rstrip("/") + "/chat/completions"
    headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
    if client is not None:
        response = _post(client, url, body, headers, config.timeout_seconds)
    else:
        with httpx.Client() as own:
            response = _post(own, url, body, headers, config.timeout_seconds)
    if not response.is_success and response.status_code not in (401, 403):
        logger.warning("%s answered %s: %r", shown(url), response.status_code, response.text[:BODY_PREVIEW_CHARS])
    if response.status_code == 429 or response.status_code >= 500:
        raise LlmUnavailable(f"{shown(url)} answered {response.status_code}; try again later", retryable=True)
    if not response.is_success:
        advice = _refusal_advice(response.status_code, config, response_format is not None)
        raise LlmUnavailable(f"{shown(url)} answered {response.status_code}: {advice}", retryable=False)
    try:
        answer = _Answer.model_validate_json(response.content)
    except ValidationError:
        return None
    usage = answer.usage or _Usage()
    return Completion(answer.choices[0].message.content, answer.model or config.model, usage.prompt_tokens,
                      usage.completion_tokens)


def _post(client: httpx.Client, url: str, body: dict[str, Any], headers: dict[str, str], timeout: float
          ) -> httpx.Response:
    try:
        return client.post(url, json=body, headers=headers, timeout=timeout)
    except httpx.TimeoutException as error:
        raise LlmUnavailable(f"{shown(url)} gave no answer within {timeout}s", retryable=True) from error
    except httpx.RequestError as error:
        raise LlmUnavailable(f"could not reach {shown(url)}: {type(error).__name__}", retryable=True) from error


__all__ = ["Completion", "LlmConfig", "LlmUnavailable", "chat", "shown"]
