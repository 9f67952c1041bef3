"""The checks every way of writing a memory's text shares (client, HTTP, page, agent
tools, import), so each refuses the same input with the same words."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ValidationError

from memoryd.errors import MemoryRejected, RefusedValue, field_errors
from memoryd.models.checks import check_text


def not_blank(value: str) -> str:
    """A memory of only spaces says nothing, and every blank one would dedup as one."""
    if not value.strip():
        raise RefusedValue.keyed("text.blank")
    return value


def _clean(value: str) -> str:
    return not_blank(check_text(value, "content"))


MemoryContent = Annotated[str, AfterValidator(_clean)]

# A memory's tags, however they come: at most MAX_TAGS of at most MAX_TAG_CHARS each.
MAX_TAGS = 50
MAX_TAG_CHARS = 100


def kept_tags(value: Any) -> list[str]:
    """What a model's answer gives as tags, kept within the limits rather than refused
    (a bad tag must not cost its fact): a comma-separated text or a list; blanks, non-text
    and tags past MAX_TAG_CHARS dropped, the first MAX_TAGS kept."""
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list):
        return []
    tags = [t.strip() for t in items if isinstance(t, str)]
    return [t for t in tags if t and len(t) <= MAX_TAG_CHARS][:MAX_TAGS]


class _ContentIn(BaseModel):
    content: MemoryContent


def checked_content(content: str) -> str:
    """`content` as given, or MemoryRejected naming the field."""
    try:
        return _ContentIn(content=content).content
    except ValidationError as exc:
        errors = [{"field": f, "message": m} for f, m in field_errors(exc)]
        raise MemoryRejected(
            "; ".join(f"{e['field']}: {e['message']}" for e in errors), errors, exc
        ) from None
