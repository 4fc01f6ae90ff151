"""A tools/call body the API's guard refuses (a duplicate key, a NUL) is answered with what was refused, not with
the SDK's "EOF while parsing" of the empty body the guard leaves it; without a valid key it is still the 401.

Raw HTTP: the official client serialises its own JSON and cannot send a duplicate key."""

from __future__ import annotations

import httpx2
import pytest

from tests.conftest import MakeKey

INITIALIZE = (b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
              b'"capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}')
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
           "mcp-protocol-version": "2025-06-18"}


@pytest.mark.parametrize(("body", "code"), [
    (b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"search",'
     b'"arguments":{"query":"milk","query":"bread"}}}', "duplicate_key"),
    (b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"search","arguments":{"query":"a\\u0000"}}}',
     "invalid_character"),
])
def test_a_refused_body_is_a_parse_error_naming_the_refusal(mcp_url: str, make_key: MakeKey, body: bytes,
                                                           code: str) -> None:
    key = make_key()
    with httpx2.Client(timeout=30, headers=HEADERS) as http:
        opened = http.post(mcp_url, content=INITIALIZE, headers={"Authorization": f"Bearer {key}"})
        assert opened.status_code == 200, opened.text
        session = {"Authorization": f"Bearer {key}", "mcp-session-id": opened.headers["mcp-session-id"]}
        refused = http.post(mcp_url, content=body, headers=session)
        assert refused.status_code == 400, refused.text
        error = refused.json()["error"]
        assert error["code"] == -32700 and error["data"]["code"] == code
        assert "EOF" not in error["message"] and error["message"] == error["data"]["message"]
        anonymous = http.post(mcp_url, content=body)
        assert anonymous.status_code == 401 and anonymous.json()["error"] == "invalid_token"
