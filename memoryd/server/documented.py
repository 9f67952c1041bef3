"""JSON schemas that say what the validators behind them accept, so a value a client
builds from the document is one the server takes: pydantic documents a string's length
and pattern, but not what an AfterValidator refuses (a NUL byte, a blank after
stripping, a zone name the zone database lacks, a turn before 2000).

The OpenAPI document generates every request body with DocumentedSchema."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import cache
from typing import Any
from zoneinfo import available_timezones

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue, models_json_schema
from pydantic_core.core_schema import AfterValidatorFunctionSchema, StringSchema

REF_TEMPLATE = "#/components/schemas/{model}"
NO_NUL = "^[^\\x00]*$"  # NUL bytes: no database stores them faithfully
# What str.strip() removes, spelled out: `\\s` differs between ECMA-262 (the document's
# regex dialect), Python and Rust (U+0085, U+001C-U+001F, U+FEFF).
SPACE = "\\x09-\\x0d\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000"
NOT_BLANK = f"[^{SPACE}]"  # not blank once stripped
LANGUAGE_TAG = "^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})*$"
# "UTC+8", "GMT-03:30": an offset of at most 14 hours, as zones.parse_zone reads one.
UTC_OFFSET = "^(([Uu][Tt][Cc]|[Gg][Mm][Tt]) ?[+-]((0?[0-9]|1[0-3])(:?[0-5][0-9])?|14(:?00)?))$"
TIME_ZONE = "TimeZone"
SINCE_2000 = "^[2-9][0-9]{3}-"  # turns are not said before 2000 (nor after 9999)


def _with_pattern(pattern: str) -> Callable[[JsonSchemaValue], JsonSchemaValue]:
    def add(json_schema: JsonSchemaValue) -> JsonSchemaValue:
        return add_pattern(json_schema, pattern)

    return add


def add_pattern(json_schema: JsonSchemaValue, pattern: str) -> JsonSchemaValue:
    """`json_schema` that also requires `pattern`: merged into one regex when both say
    which characters are barred and whether the text may be blank (generators read one
    regex far faster than several); else the second goes in allOf."""
    if "pattern" not in json_schema:
        return {**json_schema, "pattern": pattern}
    merged = _merged(json_schema["pattern"], pattern)
    if merged is not None:
        return {**json_schema, "pattern": merged}
    return {**json_schema, "allOf": [*json_schema.get("allOf", []), {"pattern": pattern}]}


_BARRED = re.compile(r"\^\[\^(?P<barred>[^\]]*)\](?P<count>[*+])\$")
_BARRED_NOT_BLANK = re.compile(
    r"\^\[\^(?P<barred>[^\]]*)\]\*\[\^" + re.escape(SPACE) + r"(?P=barred)\]\[\^(?P=barred)\]\*\$"
)


def _reading(pattern: str) -> tuple[str, bool, bool] | None:
    """(barred characters, not blank, not empty) of the patterns this module writes."""
    if pattern == NOT_BLANK:
        return "", True, True
    if match := _BARRED.fullmatch(pattern):
        return match["barred"], False, match["count"] == "+"
    if match := _BARRED_NOT_BLANK.fullmatch(pattern):
        return match["barred"], True, True
    return None


def _merged(first: str, second: str) -> str | None:
    readings = [_reading(first), _reading(second)]
    if None in readings:
        return None
    barred = "".join(dict.fromkeys(r[0] for r in readings if r is not None and r[0]))
    not_blank = any(r[1] for r in readings if r is not None)
    not_empty = any(r[2] for r in readings if r is not None)
    if not_blank:
        return f"^[^{barred}]*[^{SPACE}{barred}][^{barred}]*$" if barred else NOT_BLANK
    return f"^[^{barred}]{'+' if not_empty else '*'}$"


def _content(json_schema: JsonSchemaValue) -> JsonSchemaValue:
    return add_pattern(add_pattern(json_schema, NO_NUL), NOT_BLANK)


def _time_zone(_json_schema: JsonSchemaValue) -> JsonSchemaValue:
    return {"$ref": REF_TEMPLATE.format(model=TIME_ZONE)}


# Validators by module and qualified name, and what each adds to the schema it checks.
RULES: dict[str, Callable[[JsonSchemaValue], JsonSchemaValue]] = {
    "memoryd.models.checks.clean_text": _with_pattern(NO_NUL),
    "memoryd.server.schemas._clean": _with_pattern(NO_NUL),  # CleanText
    "memoryd.memories.checks._clean": _content,  # MemoryContent
    "memoryd.memories.checks.not_blank": _with_pattern(NOT_BLANK),
    "memoryd.models.checks.language_tag": _with_pattern(LANGUAGE_TAG),
    "memoryd.models.checks.time_zone_name": _time_zone,
    "memoryd.models.schemas.TurnIn._content_ok": _content,
    "memoryd.models.schemas.TurnIn._not_shared": lambda s: {**s, "not": {"const": "*"}},
    "memoryd.models.schemas.TurnIn._aware_and_sane": _with_pattern(SINCE_2000),
}


class DocumentedSchema(GenerateJsonSchema):
    def str_schema(self, schema: StringSchema) -> JsonSchemaValue:
        json_schema = super().str_schema(schema)
        if schema.get("strip_whitespace") and schema.get("min_length", 0) >= 1:
            json_schema = add_pattern(json_schema, NOT_BLANK)  # " " is "" once stripped
        return json_schema

    def function_after_schema(self, schema: AfterValidatorFunctionSchema) -> JsonSchemaValue:
        json_schema = super().function_after_schema(schema)
        function = schema["function"]["function"]
        function = getattr(function, "__func__", function)  # a model's field_validator
        name = f"{getattr(function, '__module__', '')}.{getattr(function, '__qualname__', '')}"
        rule = RULES.get(name)
        return rule(json_schema) if rule else json_schema


@cache
def time_zone_schema() -> dict[str, Any]:
    """The zone names of this machine's zone database, or an offset: one pattern, not
    an enum, so generated clients take a string and test generators do not walk 600
    values."""
    names = "|".join(_literal(name) for name in sorted(available_timezones()))
    return {
        "title": TIME_ZONE,
        "description": "An IANA time zone name, or an offset such as UTC+8 or UTC-03:30",
        "type": "string",
        "pattern": f"^({names}|{UTC_OFFSET[2:-2]})$",
        "examples": ["Europe/Lisbon", "UTC+8"],
    }


def _literal(name: str) -> str:
    """`name` as a regex read alike by ECMA-262, Python and Rust (zone names hold
    letters, digits and `/_-+`)."""
    return name.replace("+", "\\+")


def model_schemas(models: list[type[BaseModel]]) -> dict[str, Any]:
    """Components for `models` and every model they use, TimeZone among them if used."""
    _, top = models_json_schema(
        [(model, "validation") for model in models],
        ref_template=REF_TEMPLATE,
        schema_generator=DocumentedSchema,
    )
    components: dict[str, Any] = dict(top.get("$defs", {}))
    if json.dumps(REF_TEMPLATE.format(model=TIME_ZONE)) in json.dumps(components):
        components[TIME_ZONE] = time_zone_schema()
    return components
