"""Strict MCP calls: a body the API's guard refuses (a duplicate key, a NUL) is answered with what was refused,
not with the SDK's "EOF while parsing" of the empty body the guard leaves it (without a valid key it is still the
401); ``list()`` refuses a cursor or filters without a resource rather than ignoring them.

The refused bodies go over raw HTTP: the official client serialises its own JSON and cannot send a duplicate
key."""

from __future__ import annotations

import httpx2
import pytest

from tests.conftest import MakeKey
from tests.mcp.conftest import data_of, error_of, mcp_session

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


async def test_list_without_a_resource_refuses_a_cursor_or_filters_instead_of_ignoring_them(
    mcp_url: str, make_key: MakeKey
) -> None:
    """``list()`` is the directory: a cursor or filters only mean something with a resource, so a call that sends
    them without one is told so rather than answered the directory as if they were not there."""
    async with mcp_session(mcp_url, make_key()) as (session, _):
        for arguments in ({"cursor": "dev.abc.def"}, {"filters": {"status": "open"}}):
            assert error_of(await session.call_tool("list", arguments))["code"] == "resource_required"
        assert data_of(await session.call_tool("list", {"filters": {}}))["resources"]
