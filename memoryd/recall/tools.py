"""Agent tools: `memory_save` and `memory_recall` (seed 000 §5) in the OpenAI tools format.

Register `TOOLS` with any function-calling model; pass each tool call it makes to
`MemoryClient.execute_tool(agent_id, user_id, name, arguments)`. Arguments are
validated; a bad call returns {"ok": false, "error": ...} for the model to correct,
never an exception.
"""

from __future__ import annotations

import json
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from memoryd.errors import field_errors
from memoryd.memories.checks import not_blank
from memoryd.models.tables import Category
from memoryd.recall.hits import Hit


class MemorySaveArgs(BaseModel):
    """Store, update or delete a long-term memory; it will be recalled in later conversations."""

    action: Literal["create", "update", "delete"]
    name: str = Field("", max_length=200, description="Short title of the memory")
    type: Category = Field(Category.USER, description="What kind of memory this is")
    content: str | None = Field(None, max_length=2000, description="The memory itself")
    description: str | None = Field(None, max_length=300, description="One-line description")
    id: int | None = Field(None, description="Memory id, for update and delete")

    @field_validator("content")
    @classmethod
    def _not_blank(cls, value: str | None) -> str | None:
        return value if value is None else not_blank(value)

    @model_validator(mode="after")
    def _needs(self) -> MemorySaveArgs:
        if self.action == "create" and self.content is None:
            raise ValueError("create needs 'content'")
        if self.action in ("update", "delete") and self.id is None:
            raise ValueError(f"{self.action} needs the memory 'id'")
        return self


class MemoryRecallArgs(BaseModel):
    """Search long-term memory for information relevant to the conversation."""

    query: str = Field(max_length=2000, description="What to look for")
    type: Category | None = Field(None, description="Only memories of this kind")
    limit: int = Field(5, ge=1, le=20, description="How many memories to return")


def recalled(hit: Hit) -> dict[str, Any]:
    """A recalled memory as the memory_recall tool answers it: a pending turn says so
    and when it was said."""
    item = {"id": hit.id, "type": hit.category, "name": hit.name, "content": hit.content}
    return item | ({"pending": True, "said_at": hit.created_at.isoformat()} if hit.pending else {})


def _schema(name: str, model: type[BaseModel]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": (model.__doc__ or "").strip(),
            "parameters": model.model_json_schema(),
        },
    }


TOOLS: list[dict[str, Any]] = [
    _schema("memory_save", MemorySaveArgs),
    _schema("memory_recall", MemoryRecallArgs),
]
ToolArgs = MemorySaveArgs | MemoryRecallArgs
ARGUMENT_MODELS: dict[str, type[ToolArgs]] = {
    "memory_save": MemorySaveArgs,
    "memory_recall": MemoryRecallArgs,
}


Args = TypeVar("Args", bound=BaseModel)


def validated(model: type[Args], data: Any) -> Args:
    """`data` as `model`; ValueError naming each bad field ("query: Field required")."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{f or 'arguments'}: {m}" for f, m in field_errors(exc))
        raise ValueError(problems) from None


def parse_tool_call(name: str, arguments: str | dict[str, Any]) -> ToolArgs:
    """Validated arguments of a tool call; ValueError with a readable message otherwise."""
    model = ARGUMENT_MODELS.get(name)
    if model is None:
        raise ValueError(f"unknown tool {name!r}; memoryd provides {sorted(ARGUMENT_MODELS)}")
    try:
        data = json.loads(arguments) if isinstance(arguments, str) else arguments
    except json.JSONDecodeError as exc:
        raise ValueError(f"arguments are not valid JSON: {exc.msg}") from None
    return validated(model, data)
