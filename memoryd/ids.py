"""The characters an id may hold, and the words a refusal says them in (errors.py)."""

from __future__ import annotations

# Agent, user and session ids: no control character (C0, DEL, C1) and no "/", which
# would make an id no path route can name.
IDENT_PATTERN = r"^[^/\x00-\x1f\x7f-\x9f]+$"
# A turn's key may hold "/" ("web/42"): the status route takes the rest of its path.
TURN_KEY_PATTERN = r"^[^\x00-\x1f\x7f-\x9f]+$"

PATTERN_WORDS = {
    IDENT_PATTERN: "an id may not hold '/' or a control character",
    TURN_KEY_PATTERN: "a turn key may not hold a control character",
}
