"""JSON Merge Patch (RFC 7396): how profiles are patched, and how their history is kept.

`apply` is the RFC's algorithm; `diff` is its inverse, the smallest patch that turns one
document into another, so each change of a profile is stored as one patch and replaying
the patches in order rebuilds it.
"""

from __future__ import annotations

from typing import Any


def apply(target: Any, patch: Any) -> Any:
    """RFC 7396 §2: objects merge key by key, null removes a key, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply(result.get(key), value)
    return result


def diff(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The merge patch that turns `old` into `new` (an empty one when they are equal)."""
    patch: dict[str, Any] = {key: None for key in old if key not in new}
    for key, value in new.items():
        before = old.get(key)
        if key in old and before == value:
            continue
        if isinstance(before, dict) and isinstance(value, dict):
            patch[key] = diff(before, value)
        else:
            patch[key] = value
    return patch
