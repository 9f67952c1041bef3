"""The minimal TypeScript client of the HTTP API's page (docs/http.md), generated from
the OpenAPI document, and the committed copy of that document: `python -m
memoryd.server.typescript` refreshes both (tests/server/test_examples.py fails when
either is stale)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
OPENAPI_FILE = ROOT / "docs" / "openapi.json"
HTTP_PAGE = ROOT / "docs" / "http.md"

# (method, path, function name): what a chat backend calls on every message.
OPERATIONS = [
    ("post", "/v1/turns", "postTurns"),
    ("post", "/v1/sessions/{agent_id}/{user_id}/{session_id}/end", "endSession"),
    ("post", "/v1/context", "postContext"),
    ("post", "/v1/recall", "postRecall"),
]


def openapi_document() -> dict[str, Any]:
    from memoryd.client import MemoryClient
    from memoryd.server.app import create_app
    from memoryd.settings import Settings

    settings = Settings()
    return create_app(settings, client=MemoryClient(settings, dispatch=False)).openapi()


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _ts_type(schema: dict[str, Any], needed: set[str]) -> str:
    if "$ref" in schema:
        needed.add(_ref_name(schema["$ref"]))
        return _ref_name(schema["$ref"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " | ".join(_ts_type(s, needed) for s in schema[key])
    if "enum" in schema:
        return " | ".join(json.dumps(v) for v in schema["enum"])
    if "const" in schema:
        return json.dumps(schema["const"])
    kind = schema.get("type")
    if kind == "array":
        item = _ts_type(schema.get("items", {}), needed)
        return f"({item})[]" if "|" in item else f"{item}[]"
    if kind == "object" and "properties" not in schema:
        extra = schema.get("additionalProperties")
        value = _ts_type(extra, needed) if isinstance(extra, dict) and extra else "unknown"
        return f"Record<string, {value}>"
    return {
        "string": "string",
        "integer": "number",
        "number": "number",
        "boolean": "boolean",
        "null": "null",
    }.get(str(kind), "unknown")


def _interface(name: str, schema: dict[str, Any], needed: set[str]) -> str:
    if "properties" not in schema:
        return f"export type {name} = {_ts_type(schema, needed)};"
    required = set(schema.get("required", []))
    lines = [f"export interface {name} {{"]
    for prop, sub in schema["properties"].items():
        optional = "" if prop in required else "?"
        lines.append(f"  {prop}{optional}: {_ts_type(sub, needed)};")
    lines.append("}")
    return "\n".join(lines)


def _function(doc: dict[str, Any], method: str, path: str, name: str, needed: set[str]) -> str:
    op = doc["paths"][path][method]
    params = re.findall(r"{(\w+)}", path)
    body = op.get("requestBody", {}).get("content", {}).get("application/json", {})
    ok = next(code for code in op["responses"] if code.startswith("2"))
    result = op["responses"][ok]["content"]["application/json"]["schema"]
    args = ["base: string", "key: string", *(f"{p}: string" for p in params)]
    if body:
        args.append(f"body: {_ts_type(body['schema'], needed)}")
    url = re.sub(r"{(\w+)}", r"${encodeURIComponent(\1)}", path)
    send_body = "\n    body: JSON.stringify(body)," if body else ""
    return f"""/** {op.get("summary", "")} */
export async function {name}({", ".join(args)}): Promise<{_ts_type(result, needed)}> {{
  const res = await fetch(`${{base}}{url}`, {{
    method: "{method.upper()}",
    headers: {{ authorization: `Bearer ${{key}}`, "content-type": "application/json" }},{send_body}
  }});
  if (!res.ok) throw new Error(((await res.json()) as Problem).detail);
  return res.json();
}}"""


def typescript_client(doc: dict[str, Any]) -> str:
    needed: set[str] = {"Problem"}
    functions = [_function(doc, m, p, n, needed) for m, p, n in OPERATIONS]
    schemas = doc["components"]["schemas"]
    done: dict[str, str] = {}
    while missing := sorted(needed - set(done)):
        for name in missing:
            done[name] = _interface(name, schemas[name], needed)
    header = "// Generated from docs/openapi.json by `python -m memoryd.server.typescript`."
    return "\n\n".join([header, *(done[n] for n in sorted(done)), *functions]) + "\n"


def page_with(page: str, client: str) -> str:
    return re.sub(
        r"```typescript\n.*?```", lambda _m: f"```typescript\n{client}```", page, flags=re.S
    )


def main() -> int:
    doc = openapi_document()
    OPENAPI_FILE.parent.mkdir(exist_ok=True)
    OPENAPI_FILE.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    HTTP_PAGE.write_text(page_with(HTTP_PAGE.read_text(), typescript_client(doc)))
    print(f"wrote {OPENAPI_FILE} and the TypeScript example in {HTTP_PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
