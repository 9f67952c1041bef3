"""What the OpenAPI document says a profile's `content` holds, per profile type, so a
generated client knows every field: the content models themselves for reads and PUT,
and their merge-patch shapes for PATCH. The routes still hand `content` to the profile
code as sent, which validates it (documentation only: behaviour is unchanged)."""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from memoryd.models.profiles import CONTENT_MODELS, ProfileOut, ProfileType

FORBID = ConfigDict(extra="forbid")


@cache
def merge_patch_model(model: type[BaseModel]) -> type[BaseModel]:
    """`model` as an RFC 7396 merge patch of it: every field optional and nullable (null
    removes it, back to its default), objects patched field by field, lists whole."""
    fields: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        annotation: Any = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            annotation = merge_patch_model(annotation)
        elif field.metadata:
            annotation = Annotated[(annotation, *field.metadata)]
        fields[name] = (annotation | None, Field(None, description=field.description))
    return create_model(
        f"{model.__name__}Patch",
        __config__=FORBID,
        __doc__=f"A JSON Merge Patch (RFC 7396) of {model.__name__}.",
        **fields,
    )


@cache
def body_model(kind: ProfileType, method: str) -> type[BaseModel]:
    """PUT's body (the whole document) or PATCH's (a merge patch of it)."""
    content = CONTENT_MODELS[kind]
    patch = method == "PATCH"
    return create_model(
        f"{kind.value.title()}Profile{'Patch' if patch else 'Put'}",
        __config__=FORBID,
        __doc__=(
            f"The {kind.value} profile, merged into the stored one (RFC 7396: objects merge,"
            " null removes a field, a list replaces the list)."
            if patch
            else f"The whole {kind.value} profile, replacing the stored one."
        ),
        content=(merge_patch_model(content) if patch else content, ...),
    )


@cache
def out_model(kind: ProfileType) -> type[BaseModel]:
    """ProfileOut of one type: its `content` is that type's document."""
    of_kind: Any = Literal[kind]
    return create_model(
        f"{kind.value.title()}ProfileOut",
        __base__=ProfileOut,
        __doc__=f"The {kind.value} profile with its version and per-field meta.",
        type=(of_kind, ...),
        content=(CONTENT_MODELS[kind], ...),
    )


def request_body(model: type[BaseModel]) -> dict[str, Any]:
    """`openapi_extra` documenting `model` as the JSON body."""
    schema = {"$ref": f"#/components/schemas/{model.__name__}"}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def body_models() -> list[type[BaseModel]]:
    """The bodies to add to the document's components."""
    return [body_model(kind, method) for kind in ProfileType for method in ("PUT", "PATCH")]
