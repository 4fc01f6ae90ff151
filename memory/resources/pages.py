"""Pages of at most 65,536 UTF-8 bytes, measured on the very bytes sent (seed 000 §5).

Every answer of the reader is encoded by :func:`encode` (compact JSON, UTF-8, non-ASCII as is), which
the routes send unchanged, so the budget holds for the response body itself, cursor included.

A record too long for one page is cut into *units* in document order, the same cut for the same data
and field set: a value whose encoding is at most :data:`UNIT_BYTES` is one unit; a longer object or
array is first announced empty (``{}`` / ``[]`` at its path) then cut member by member; a longer string
is cut into pieces of at most :data:`UNIT_BYTES`, each located by its path and the Unicode character
(code point) offset it starts at — never a split surrogate pair, never UTF-16 units. A page carries as
many whole units as fit; its cursor names the next unit. Reassembly: start from ``{}``; a fragment
without ``offset`` sets its path (an array index equal to the array's length appends); one with an
offset extends the string at its path, whose length is that offset.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from memory.resources import pointers
from memory.resources.cursors import CursorPastEnd
from memory.resources.results import Fragment, ReadPage

PAGE_BYTES = 65_536
UNIT_BYTES = 8_192
_ESCAPED = {'"': 2, "\\": 2, "\b": 2, "\f": 2, "\n": 2, "\r": 2, "\t": 2}


def encode(result: BaseModel) -> bytes:
    """The response body of a result: what is measured is what is sent."""
    return _dumps(result.model_dump(mode="json")).encode("utf-8")


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def size(value: Any) -> int:
    return len(_dumps(value).encode("utf-8"))


def _char_bytes(char: str) -> int:
    """The bytes one character takes inside a JSON string as :func:`encode` writes it."""
    escaped = _ESCAPED.get(char)
    if escaped is not None:
        return escaped
    if char < " ":
        return 6  # \u00XX
    return len(char.encode("utf-8"))


@dataclass(frozen=True)
class Unit:
    path: str
    offset: int | None
    value: Any

    def fragment(self) -> Fragment:
        return Fragment(path=self.path, offset=self.offset, value=self.value)


def units(data: dict[str, Any]) -> list[Unit]:
    """The cut of ``data`` into units, in document order."""
    out: list[Unit] = []

    def walk(value: Any, path: str) -> None:
        if not isinstance(value, (dict, list, str)) or size(value) <= UNIT_BYTES:
            out.append(Unit(path, None, value))
        elif isinstance(value, str):
            out.extend(Unit(path, offset, piece) for offset, piece in _pieces(value))
        elif isinstance(value, dict):
            out.append(Unit(path, None, {}))
            for key, child in value.items():
                walk(child, f"{path}/{pointers.escape(key)}")
        else:
            out.append(Unit(path, None, []))
            for index, child in enumerate(value):
                walk(child, f"{path}/{index}")

    for key, value in data.items():
        walk(value, "/" + pointers.escape(key))
    return out


def _pieces(text: str) -> list[tuple[int, str]]:
    pieces: list[tuple[int, str]] = []
    start, used = 0, 2  # the quotes
    for index, char in enumerate(text):
        cost = _char_bytes(char)
        if used + cost > UNIT_BYTES:
            pieces.append((start, text[start:index]))
            start, used = index, 2
        used += cost
    pieces.append((start, text[start:]))
    return pieces


def read_page(ref: str, version: int | None, data: dict[str, Any], start: int | None,
              cursor_for: Callable[[int], str]) -> ReadPage:
    """The page of ``data`` from unit ``start`` (``None``: the first request, which may return ``data`` whole)."""
    if start is None:
        whole = ReadPage(ref=ref, version=version, complete=True, data=data)
        if fits(whole):
            return whole
        start = 0
    cut = units(data)
    if start >= len(cut):
        raise CursorPastEnd(f"this cursor points past the end of {ref}: its last page said complete")
    # Fill with whole units against a cursor as long as any this read can issue, then measure the real page.
    envelope = size(ReadPage(ref=ref, version=version, complete=False, fragments=[],
                             next_cursor=cursor_for(len(cut))).model_dump(mode="json"))
    end, used = start, envelope
    while end < len(cut):
        cost = size(cut[end].fragment().model_dump(mode="json")) + (1 if end > start else 0)
        if used + cost > PAGE_BYTES:
            break
        used += cost
        end += 1
    end = max(end, start + 1)  # a unit is far below a page: every page moves on
    while True:
        complete = end == len(cut)
        page = ReadPage(ref=ref, version=version, complete=complete,
                        fragments=[unit.fragment() for unit in cut[start:end]],
                        next_cursor=None if complete else cursor_for(end))
        if fits(page):
            return page
        if end == start + 1:
            raise RuntimeError(f"one unit of {ref} at {cut[start].path} does not fit a page")
        end -= 1


def fits(result: BaseModel) -> bool:
    return len(encode(result)) <= PAGE_BYTES


def reassemble(pages: list[dict[str, Any]]) -> dict[str, Any]:
    """The client's side of seed 000 §5 (what an agent does with the pages of one read, in order): set each
    fragment at its path; a piece with an offset extends its string. Here so that tests and benchmarks
    reassemble one way, the way the module docstring promises; a fragment out of order is a ValueError."""
    data: dict[str, Any] = {}
    for page in pages:
        for fragment in page["fragments"]:
            *parents, last = pointers.parse(fragment["path"])
            node: Any = data
            for token in parents:
                node = node[int(token)] if isinstance(node, list) else node[token]
            value, offset = fragment["value"], fragment.get("offset")
            key: int | str = int(last) if isinstance(node, list) else last
            if offset:  # a later piece of a long string, an array's item or an object's member alike
                held = node.get(key) if isinstance(node, dict) else node[key] if 0 <= int(key) < len(node) else None
                if not isinstance(held, str) or len(held) != offset:
                    raise ValueError(f"fragment {fragment['path']} at offset {offset} does not continue its string")
                node[key] += value
            elif isinstance(node, list):
                if key != len(node):
                    raise ValueError(f"fragment {fragment['path']} is not the next item of its array")
                node.append(value)
            else:
                node[key] = value
    return data
