"""``list(resource, filters, cursor)``: one type's records, newest change first, page by page.

Pages are keyset pages (``updated_at``, then id, both descending) behind a signed cursor bound to the
filters and the field set; a record changed between two pages moves to the front and is not repeated.
An item carries the readable fields except declared long ones (``omitted`` names them: read the ref);
an item too big for a page even alone loses its largest fields the same way, so no page passes
65,536 bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from memory.resources import pointers
from memory.resources.access import Access
from memory.resources.cursors import Binding, CursorInvalid, CursorKeys, issue, redeem
from memory.resources.declarations import Declaration, Operation
from memory.resources.derived import Shown, shown
from memory.resources.fields import without
from memory.resources.filters import parse_filters
from memory.resources.pages import PAGE_BYTES, fits, size
from memory.resources.results import ListItem, ListPage
from memory.resources.sources import Position, Source

PAGE_ITEMS = 20
TITLE_CHARS = 1_000
"""A result's title at most (the business types declare theirs this long): an undeclared bound (an intent's
summary, a memory's abstract) is shortened, so that no title alone outgrows a page; read the ref for it whole."""


def title_of(declaration: Declaration, data: dict[str, Any]) -> str:
    """The title field's value in (readable) data, shortened past :data:`TITLE_CHARS`; empty when the caller may
    not read it."""
    title = next((value for _, value in pointers.values_at(data, declaration.title) if isinstance(value, str)), "")
    return title if len(title) <= TITLE_CHARS else title[:TITLE_CHARS] + "…"


def _item(declaration: Declaration, row: Shown) -> ListItem:
    data, omitted = without(row.data, declaration.long_fields)
    omitted += [path for path in row.long_fields if path not in omitted]
    item = ListItem(ref=row.ref, resource=row.resource, title=title_of(declaration, row.data),
                    updated_at=row.updated_at, version=row.version, data=data, omitted=sorted(omitted))
    # Alone too big for a page (an unbounded note): its largest fields go, named in omitted.
    while size(item.model_dump(mode="json")) > PAGE_BYTES // 2 and item.data:
        largest = max(item.data, key=lambda key: size(item.data[key]))
        data = {key: value for key, value in item.data.items() if key != largest}
        omitted = sorted([*item.omitted, "/" + pointers.escape(largest)])
        item = item.model_copy(update={"data": data, "omitted": omitted})
    return item


def _position(raw: Any) -> Position:
    if not (isinstance(raw, list) and len(raw) == 2 and isinstance(raw[0], str | None) and isinstance(raw[1], str)):
        raise CursorInvalid("the cursor cannot be read")
    return Position(None if raw[0] is None else datetime.fromisoformat(raw[0]), raw[1])


def list_page(session: Session, access: Access, declaration: Declaration, source: Source,
              raw_filters: Mapping[str, str], cursor: str | None, keys: CursorKeys) -> ListPage:
    grant = access.grant(declaration.type, Operation.LIST)
    clauses = parse_filters(declaration, grant, raw_filters)
    binding = Binding(Operation.LIST, declaration.type, None, dict(raw_filters))
    after = None
    if cursor is not None:
        position, _ = redeem(keys, cursor, access, grant, binding)
        after = _position(position)
    rows = source.page(session, access, grant, clauses, after, PAGE_ITEMS + 1)
    items = [_item(declaration, shown(row, grant)) for row in rows[:PAGE_ITEMS]]
    more = len(rows) > PAGE_ITEMS
    for count in range(len(items), 0, -1):
        kept = items[:count]
        last = kept[-1]
        at = None if last.updated_at is None else last.updated_at.isoformat()  # None: the list is in id order
        next_cursor = (issue(keys, access, grant, binding, [at, last.ref.split(":", 1)[1]], None)
                       if more or count < len(items) else None)
        page = ListPage(items=kept, next_cursor=next_cursor)
        if fits(page):
            return page
    if items:
        raise RuntimeError(f"one {declaration.type} item does not fit a page: {items[0].ref}")
    return ListPage(items=[], next_cursor=None)
