"""What every request and response model shares: the strict request base (:class:`StrictRequest`), the
field types every request uses (texts, integers and numbers as JSON means them, timestamps in range), the
OpenAPI clean-up of request schemas, and the error body.

Requests parse strictly: unknown keys, explicit nulls, identity fields and timestamps without a time zone
are refused with a typed 422."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    model_validator,
)
from pydantic_core import PydanticCustomError

from memory.store.memories import MAX_CONTENT_CHARS

IDENTITY_FIELDS = frozenset({"tenant", "tenant_id", "user", "user_id", "caller", "principal", "roles", "agent_id"})

ShortText = Annotated[str, Field(min_length=1, max_length=256)]
Content = Annotated[str, Field(min_length=1, max_length=MAX_CONTENT_CHARS)]

EARLIEST = datetime(1900, 1, 1, tzinfo=UTC)
LATEST = datetime(2200, 1, 1, tzinfo=UTC)
"""Timestamps in requests lie in [EARLIEST, LATEST), compared in UTC. Python's datetime (and so every read of the
row) cannot hold what PostgreSQL stores past year 9999 or before year 1 in UTC: 9999-12-31T23:59:59-14:00 was
accepted and then made every read and recall meeting it a 500. No real memory, event or validity bound lies
outside two centuries around now; a typo does, and is better refused."""

INT32_MAX = 2**31 - 1
"""Largest version or position a PostgreSQL ``integer`` column can hold; a larger number is a 422."""
MAX_SAFE_INTEGER = 2**53 - 1
"""Largest revision, state version or seed a request may name: fits a ``bigint`` and, unlike 2^63-1, every
JSON parser's double exactly (so the schema's maximum means the same to every client)."""

Lax = Strict(False)
"""A request field JSON can only carry as a string (an enum value, a UUID): parsed from its string although
:class:`StrictRequest` is strict (no ``0`` for ``false``, ``"5"`` for ``5`` or ``94.0`` for ``94``)."""

NO_NUL = "^[^\\u0000]*$"
"""The schema's pattern for request strings: the request guard refuses a NUL (a lone surrogate too, which no
JSON Schema pattern can name portably)."""

IN_RANGE_YEARS = "^(19|20|21)\\d\\d-"
"""The schema's pattern for request timestamps: years 1900 to 2199 (the exact bound is in UTC)."""


def _as_text(value: Any) -> Any:
    """A request timestamp is ISO 8601 text: lax datetime parsing would take 0 as 1970-01-01T00:00:00Z."""
    if not isinstance(value, (str, datetime)):
        raise PydanticCustomError("datetime_type", "expected an ISO 8601 timestamp with a time zone")
    return value


def json_integer(value: Any) -> Any:
    """An integer as JSON Schema means it: 94 and 94.0, never true or "94" (what lax parsing would take)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PydanticCustomError("int_type", "Input should be an integer")
    if isinstance(value, float):
        if not value.is_integer():
            raise PydanticCustomError("int_from_float", "Input should be an integer, without a fractional part")
        return int(value)
    return value


def json_number(value: Any) -> Any:
    """A number: 1 and 0.5, never true or "0.5"."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PydanticCustomError("float_type", "Input should be a number")
    return value


Integer = Annotated[int, BeforeValidator(json_integer)]
"""Every integer of a request (JSON's integer: 94.0 is one); a bare ``int`` in a strict model would refuse 94.0.
An optional one spells it out with its bounds first, ``Annotated[int, Field(ge=..), BeforeValidator(..)] | None``:
with the bounds after the validator, pydantic writes them into the schema as ``ge``/``le``, not JSON Schema."""
Number = Annotated[float, BeforeValidator(json_number)]
"""Every non-integer number of a request."""


def _in_range(value: datetime) -> datetime:
    if not EARLIEST <= value < LATEST:
        raise PydanticCustomError(
            "timestamp_out_of_range",
            "timestamps must lie from 1900-01-01T00:00:00Z up to (not including) 2200-01-01T00:00:00Z",
        )
    return value


Timestamp = Annotated[
    AwareDatetime,
    Lax,
    BeforeValidator(_as_text),
    AfterValidator(_in_range),
    Field(
        description="ISO 8601 with a time zone, from 1900-01-01T00:00:00Z up to (not including) 2200-01-01T00:00:00Z",
        json_schema_extra={"pattern": IN_RANGE_YEARS},
    ),
]
"""Every timestamp of every request: ISO 8601 with a time zone, inside [EARLIEST, LATEST)."""


def without_null(schema: dict[str, Any]) -> None:
    """Drop ``null`` (and a ``null`` default) from one JSON schema, in place: for what may be left out but is
    never null (an optional field of a :class:`StrictRequest`, a query parameter)."""
    alternatives = schema.get("anyOf")
    if alternatives and {"type": "null"} in alternatives:
        rest = [alternative for alternative in alternatives if alternative != {"type": "null"}]
        del schema["anyOf"]
        if len(rest) == 1:
            schema.update(rest[0])
        else:
            schema["anyOf"] = rest
    if "default" in schema and schema["default"] is None:
        del schema["default"]


def without_nul(schema: Any) -> None:
    """Give every free string of one JSON schema (nested ones too) the :data:`NO_NUL` pattern, in place."""
    if isinstance(schema, list):
        for item in schema:
            without_nul(item)
        return
    if not isinstance(schema, dict):
        return
    if schema.get("type") == "string" and not {"pattern", "format", "enum", "const"} & schema.keys():
        schema["pattern"] = NO_NUL
    names = schema.get("propertyNames")
    if isinstance(names, dict) and "pattern" not in names:
        names["pattern"] = NO_NUL
    for key in ("items", "prefixItems", "additionalProperties", "anyOf", "oneOf", "allOf"):
        without_nul(schema.get(key))


def _as_documented(schema: dict[str, Any], _model: type[Any]) -> None:
    """The OpenAPI of a request model says what it takes: an optional field may be left out, but null is
    refused (see :class:`StrictRequest`), and so is a NUL in any string (see api.request_guard)."""
    for field in schema.get("properties", {}).values():
        without_null(field)
        without_nul(field)


class StrictRequest(BaseModel):
    """Base of every request body: strict types (``0`` is not ``false``, ``94.0`` not ``94``; enums and
    UUIDs are :data:`Lax`), no unknown keys, no explicit nulls, no identity fields."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra=_as_documented)
    identity_fields: ClassVar[frozenset[str]] = IDENTITY_FIELDS
    """Fields that would claim the caller's identity; a model naming a *target* user narrows this."""

    @model_validator(mode="before")
    @classmethod
    def _refuse_identity_and_nulls(cls, data: Any) -> Any:
        if isinstance(data, dict):
            claimed = sorted(cls.identity_fields & data.keys())
            if claimed:
                raise PydanticCustomError(
                    "identity_from_credentials",
                    "{field} is not accepted in a request body: tenant, user, agent and roles come from your API key",
                    {"field": claimed[0]},
                )
            for key, value in data.items():
                if value is None:
                    raise PydanticCustomError(
                        "null_not_allowed", "{field} may not be null: leave the field out instead", {"field": key}
                    )
        return data


def replay_of(model: type[BaseModel]) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI ``responses`` of a create that is idempotent by key: a replay answers 200 with the first result."""
    return {200: {"model": model, "description": "A replay of the same idempotency key and body: the first result"}}


class FieldProblem(BaseModel):
    field: str
    code: str
    message: str


class ErrorDetail(BaseModel):
    code: str = Field(description="machine code, e.g. invalid_character, timestamp_out_of_range, unauthorized")
    message: str = Field(description="what went wrong and what to do")
    details: dict[str, Any] = Field(default_factory=dict, description="facts of a refusal, e.g. current_version")
    fields: list[FieldProblem] = Field(default_factory=list, description="a 422's problems, one per field")
    allowed: list[str] = Field(default_factory=list, description="a 405's methods (also in the Allow header)")
    request_id: str = Field(default="", description="a 500's id, to quote when reporting it")


class ErrorOut(BaseModel):
    """The body of every error response."""

    error: ErrorDetail
