"""The README's example of the official MCP client, run as written (only its URL and key file point at this
test's server): the key in the HTTP client's headers really authenticates (issue 24, item 10)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from fastapi.testclient import TestClient

from tests.conftest import MakeKey, auth
from tests.factories import candidate

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_snippet() -> str:
    match = re.search(r"<!-- readme:mcp-client -->\n```python\n(.*?)```", README.read_text(), re.S)
    assert match, "the README lost its MCP client example"
    return match.group(1)


def test_the_readmes_mcp_client_example_finds_a_memory_with_the_key(
    mcp_url: str, client: TestClient, make_key: MakeKey, tmp_path: Path
) -> None:
    key = make_key(roles=("memory_writer",))
    written = client.post("/memory-candidates", headers=auth(key), json=candidate(
        content="月度销售报告发给财务部。The monthly sales report goes to finance.", source_level="E1"))
    assert written.status_code == 201, written.text
    key_file = tmp_path / "admin.key"
    key_file.write_text(key + "\n")
    code = readme_snippet()
    assert code.count('"http://127.0.0.1:8000/mcp"') == 1 and code.count('".mnemo/admin.key"') == 1
    code = code.replace('"http://127.0.0.1:8000/mcp"', repr(mcp_url)).replace('".mnemo/admin.key"', repr(str(key_file)))
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert written.json()["memory_id"] in ran.stdout, ran.stdout

    key_file.write_text("mnemo_abcdefghijkl_" + "x" * 43 + "\n")  # a key that is not one: refused
    refused = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0 and written.json()["memory_id"] not in refused.stdout
    assert "Server returned an error response" in refused.stderr  # how the SDK reports the endpoint's 401
