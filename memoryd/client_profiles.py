"""`MemoryClient`'s profile methods (seed 001): read, PUT, PATCH, history, prompt."""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from typing import Any

from memoryd.memories import profiles
from memoryd.models.db import session_scope, utcnow
from memoryd.models.keys import Scope
from memoryd.models.profiles import ProfileEventOut, ProfileOut, ProfileStatus, ProfileType
from memoryd.models.schemas import MAX_PAGE
from memoryd.recall.profile_prompt import render_profile
from memoryd.settings import Settings


class ProfileMethods:
    settings: Settings

    def profile(self, agent_id: str, user_id: str, type: ProfileType | str) -> ProfileOut:
        """The `user` or `work` document of a scope (the empty one if never written)."""
        with session_scope(self.settings.storage, readonly=True) as session:
            return profiles.get_profile(
                session, Scope(agent_id, user_id), ProfileType(type), utcnow()
            )

    def profiles(self, agent_id: str, user_id: str) -> dict[str, ProfileOut]:
        """Both documents, as seed 001's GET / returns them."""
        return {f"{kind}_memory": self.profile(agent_id, user_id, kind) for kind in ProfileType}

    def put_profile(
        self,
        agent_id: str,
        user_id: str,
        type: ProfileType | str,
        content: Mapping[str, Any],
        *,
        shared: bool = False,
    ) -> ProfileOut:
        """Replace the whole document; raises ProfileRejected naming each bad field."""
        with session_scope(self.settings.storage) as session:
            return profiles.put_profile(
                session,
                Scope(agent_id, user_id),
                ProfileType(type),
                content,
                utcnow(),
                shared=shared,
            )

    def patch_profile(
        self,
        agent_id: str,
        user_id: str,
        type: ProfileType | str,
        patch: Mapping[str, Any],
        *,
        shared: bool = False,
    ) -> ProfileOut:
        """Change part of the document with a JSON Merge Patch (RFC 7396): objects merge,
        null removes a field, a list replaces the list."""
        with session_scope(self.settings.storage) as session:
            return profiles.patch_profile(
                session,
                Scope(agent_id, user_id),
                ProfileType(type),
                patch,
                utcnow(),
                shared=shared,
            )

    def set_profile_status(
        self,
        agent_id: str,
        user_id: str,
        type: ProfileType | str,
        status: ProfileStatus | str,
        *,
        shared: bool = False,
    ) -> ProfileOut:
        """A disabled document is neither shown in prompts nor updated by extraction."""
        with session_scope(self.settings.storage) as session:
            return profiles.set_status(
                session,
                Scope(agent_id, user_id),
                ProfileType(type),
                ProfileStatus(status),
                utcnow(),
                shared=shared,
            )

    def profile_history(
        self,
        agent_id: str,
        user_id: str,
        type: ProfileType | str,
        *,
        after: int = 0,
        limit: int = MAX_PAGE,
    ) -> builtins.list[ProfileEventOut]:
        """The changes, oldest first, each as the merge patch that made it: up to
        `limit` (1 to MAX_PAGE, 500, or a ValueError) after version `after`; the next
        page starts after the last one's version."""
        scope, kind = Scope(agent_id, user_id), ProfileType(type)
        with session_scope(self.settings.storage, readonly=True) as session:
            return profiles.history(session, scope, kind, after, limit)

    def build_profile_prompt(
        self, agent_id: str, user_id: str, type: ProfileType | str, token_budget: int = 600
    ) -> str:
        """The document for a system prompt, between seed 001's markers (e.g.
        `<!-- USER_MEMORY_START -->`), most useful first within `token_budget`; "" when
        nothing is known or the document is disabled."""
        document = self.profile(agent_id, user_id, type)
        if document.status == ProfileStatus.DISABLED:
            return ""
        return render_profile(document.type, document.content, token_budget)
