"""A profile document rendered for a system prompt, between seed 001's markers.

Empty and default fields are left out; what the agent most needs comes first (the
user's rules and what to avoid before their interests), list items most confident and
most recent first; lines that do not fit `token_budget` are dropped. No text of the
document can open or close the markers.
"""

from __future__ import annotations

from typing import Any

from memoryd.models.profiles import ProfileType, default_content
from memoryd.text import estimate_tokens

MARKERS = {
    ProfileType.USER: ("<!-- USER_MEMORY_START -->", "<!-- USER_MEMORY_END -->"),
    ProfileType.WORK: ("<!-- WORK_MEMORY_START -->", "<!-- WORK_MEMORY_END -->"),
}

# Most useful first.
ORDER = {
    ProfileType.USER: [
        "custom_rules",
        "avoid_topics",
        "preferences.communication_style",
        "primary_language",
        "preferences.language_preference",
        "timezone",
        "occupation",
        "people",
        "scheduling_preferences",
        "recurring_routines",
        "places",
        "interests",
        "preferences.notification_preference",
        "preferences.location_preference",
        "preferences.work_lifestyle",
    ],
    ProfileType.WORK: [
        "work_rules",
        "occupation",
        "current_projects",
        "team_members",
        "work_habits",
        "expertise",
        "preferred_tools",
        "team_context",
    ],
}


def render_profile(kind: ProfileType, content: dict[str, Any], token_budget: int) -> str:
    """The block for this document within `token_budget`, or "" when nothing is known."""
    start, end = MARKERS[kind]
    used = estimate_tokens(start) + estimate_tokens(end) + 2
    lines: list[str] = []
    defaults = default_content(kind)
    for path in ORDER[kind]:
        value, default = _at(content, path), _at(defaults, path)
        if value in (None, [], "") or value == default:
            continue
        for line in _lines(_label(path), value, default):
            cost = estimate_tokens(line) + 1
            if used + cost <= token_budget:
                lines.append(line)
                used += cost
    if not lines:
        return ""
    return "\n".join([start, *lines, end])


def _at(doc: dict[str, Any], path: str) -> Any:
    node: Any = doc
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def _label(path: str) -> str:
    return path.rsplit(".", 1)[-1].replace("_", " ").capitalize()


def _clean(value: Any) -> str:
    """No value may open or close an HTML comment, so none can end the block early."""
    return str(value).replace("<!--", "<! --").replace("-->", "-- >").replace("\n", " ").strip()


def _lines(label: str, value: Any, default: Any) -> list[str]:
    if isinstance(value, dict):  # a group of fields: one line each that is set
        out = []
        for key, item in value.items():
            if item in (None, [], "") or (isinstance(default, dict) and default.get(key) == item):
                continue
            out += _lines(f"{label} / {key.replace('_', ' ')}", item, None)
        return out
    if isinstance(value, list) and value and isinstance(value[0], dict):
        if "name" in value[0]:
            return [f"{label}:", *(f"- {_item(i)}" for i in _most_useful(value))]
        return [f"{label}: " + "; ".join(_window(w) for w in value)]
    if isinstance(value, list):
        return [f"{label}: " + "; ".join(_clean(v) for v in value)]
    return [f"{label}: {_clean(value)}"]


def _most_useful(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Most confident first, the most recently confirmed first among equals."""
    recent_first = sorted(items, key=lambda i: str(_meta(i).get("last_updated_at")), reverse=True)
    return sorted(recent_first, key=lambda i: -float(_meta(i).get("confidence") or 0))


def _meta(item: dict[str, Any]) -> dict[str, Any]:
    meta = item.get("meta")
    return meta if isinstance(meta, dict) else {}


def _item(item: dict[str, Any]) -> str:
    details = []
    for key, value in item.items():
        if key in ("name", "meta") or value in (None, [], ""):
            continue
        if isinstance(value, list) and value and isinstance(value[0], dict):
            shown = "; ".join(_item(v) if "name" in v else _window(v) for v in value)
        elif isinstance(value, list):
            shown = ", ".join(_clean(v) for v in value)
        else:
            shown = _clean(value)
        details.append(f"{key.replace('_', ' ')}: {shown}")
    name = _clean(item["name"])
    return f"{name} ({'; '.join(details)})" if details else name


def _window(window: dict[str, Any]) -> str:
    days = ", ".join(window.get("weekdays") or []) or "every day"
    return f"{days} {window.get('start')}-{window.get('end')}"
