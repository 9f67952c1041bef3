"""The two structured profile documents of a scope (seed 001), field by field.

`user` (UserMemoryContent) is who the person is; `work` (WorkProfileContent) what they
work on. Items of lists carry `meta` {source, confidence, last_updated_at}; the same
facts for plain fields (occupation, timezone, …) are kept beside the document, in the
profile row's `field_meta`, so the documents stay exactly seed 001's shape.
"""

from __future__ import annotations

import enum
from datetime import date, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from memoryd.models.checks import clean_text, language_tag, time_zone_name

# No NUL or lone surrogate in any value (as for turns); zones and languages as the
# context block and the extractor's date line can read them.
Text = Annotated[
    str, StringConstraints(strip_whitespace=True, max_length=2000), AfterValidator(clean_text)
]
Name = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=200),
    AfterValidator(clean_text),
]
TimeZone = Annotated[
    str, StringConstraints(strip_whitespace=True, max_length=100), AfterValidator(time_zone_name)
]
Language = Annotated[
    str, StringConstraints(strip_whitespace=True, max_length=35), AfterValidator(language_tag)
]
Clock = Annotated[str, StringConstraints(pattern=r"^([01]\d|2[0-3]):[0-5]\d$")]
Weekday = Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]


class ProfileType(enum.StrEnum):
    USER = "user"
    WORK = "work"


class ProfileStatus(enum.StrEnum):
    ACTIVE = "active"
    DISABLED = "disabled"


class _Doc(BaseModel):
    """Unknown fields are refused: a typo in a PUT or PATCH must not vanish silently."""

    model_config = ConfigDict(extra="forbid")


class ItemMeta(_Doc):
    source: Text | None = None  # extractor, api, import, …
    confidence: float = Field(1.0, ge=0, le=1)
    last_updated_at: datetime | None = None


class TimeWindow(_Doc):
    weekdays: list[Weekday] = Field(default_factory=list)
    start: Clock
    end: Clock


# ----------------------------------------------------------------------------- user


class Person(_Doc):
    name: Name
    relationship: Text | None = None
    role: Text | None = None
    preferred_contact_channel: Text | None = None
    notes: Text | None = None
    meta: ItemMeta = Field(default_factory=ItemMeta)


class Place(_Doc):
    name: Name
    category: Text | None = None
    address: Text | None = None
    timezone: TimeZone | None = None
    commute_minutes: int | None = Field(None, ge=0)
    preference: Literal["like", "neutral", "avoid"] | None = None
    notes: Text | None = None
    meta: ItemMeta = Field(default_factory=ItemMeta)


class Preferences(_Doc):
    communication_style: Text | None = None
    language_preference: list[Language] = Field(default_factory=list)
    location_preference: Text | None = None
    work_lifestyle: Text | None = None
    notification_preference: list[Text] = Field(default_factory=list)


class SchedulingPreferences(_Doc):
    productive_windows: list[TimeWindow] = Field(default_factory=list)
    preferred_meeting_windows: list[TimeWindow] = Field(default_factory=list)
    no_meeting_windows: list[TimeWindow] = Field(default_factory=list)
    deep_work_windows: list[TimeWindow] = Field(default_factory=list)
    preferred_meeting_duration_minutes: list[int] = Field(default_factory=lambda: [30, 60])
    meeting_buffer_minutes: int | None = Field(None, ge=0)
    max_meetings_per_day: int | None = Field(None, ge=0)
    notes: Text | None = None


class Routine(_Doc):
    name: Name
    description: Text | None = None
    cadence: Text | None = None
    time_windows: list[TimeWindow] = Field(default_factory=list)
    importance: Text | None = None
    meta: ItemMeta = Field(default_factory=ItemMeta)


class UserMemoryContent(_Doc):
    occupation: Text | None = None
    timezone: TimeZone | None = None
    primary_language: Language | None = None
    people: list[Person] = Field(default_factory=list)
    places: list[Place] = Field(default_factory=list)
    preferences: Preferences = Field(default_factory=Preferences)
    scheduling_preferences: SchedulingPreferences = Field(default_factory=SchedulingPreferences)
    interests: list[Text] = Field(default_factory=list)
    avoid_topics: list[Text] = Field(default_factory=list)
    custom_rules: list[Text] = Field(default_factory=list)
    recurring_routines: list[Routine] = Field(default_factory=list)


# ----------------------------------------------------------------------------- work


class Milestone(_Doc):
    name: Name
    due_date: date | None = None
    status: Text | None = None
    notes: Text | None = None


class Project(_Doc):
    name: Name
    description: Text | None = None
    status: Literal["planned", "active", "paused", "completed"] | None = None
    priority: Text | None = None
    deadline: date | None = None
    collaborators: list[Text] = Field(default_factory=list)
    key_milestones: list[Milestone] = Field(default_factory=list)
    notes: Text | None = None
    meta: ItemMeta = Field(default_factory=ItemMeta)


class WorkHabits(_Doc):
    available_hours: list[TimeWindow] = Field(default_factory=list)
    deep_work_blocks: list[TimeWindow] = Field(default_factory=list)
    preferred_meeting_windows: list[TimeWindow] = Field(default_factory=list)
    no_meeting_windows: list[TimeWindow] = Field(default_factory=list)
    preferred_meeting_duration_minutes: list[int] = Field(default_factory=lambda: [30, 60])
    notification_channel: Text | None = None
    notes: Text | None = None


class TeamMember(_Doc):
    name: Name
    role: Text | None = None
    relationship: Text | None = None
    preferred_contact_channel: Text | None = None
    notes: Text | None = None
    meta: ItemMeta = Field(default_factory=ItemMeta)


class WorkProfileContent(_Doc):
    occupation: Text | None = None
    expertise: list[Text] = Field(default_factory=list)
    preferred_tools: list[Text] = Field(default_factory=list)
    current_projects: list[Project] = Field(default_factory=list)
    work_habits: WorkHabits = Field(default_factory=WorkHabits)
    team_members: list[TeamMember] = Field(default_factory=list)
    team_context: Text | None = None
    work_rules: list[Text] = Field(default_factory=list)


CONTENT_MODELS: dict[ProfileType, type[UserMemoryContent] | type[WorkProfileContent]] = {
    ProfileType.USER: UserMemoryContent,
    ProfileType.WORK: WorkProfileContent,
}


def default_content(kind: ProfileType) -> dict[str, Any]:
    """The empty document a scope starts with (seed 001's registration rule)."""
    return CONTENT_MODELS[kind]().model_dump(mode="json")


class ProfileUpdate(BaseModel):
    """One change to a profile document, as the extractor proposes it."""

    model_config = ConfigDict(extra="ignore")

    profile: ProfileType
    op: Literal["set", "add", "update", "remove"]
    path: str = Field(min_length=1, max_length=100, pattern=r"^[a-z_]+(\.[a-z_]+)?$")
    key: str | None = Field(None, max_length=200)  # the item's name, for update/remove
    value: Any = None
    confidence: float = Field(ge=0, le=1)
    changed: bool = False  # the turn says the value changed: it may replace a surer one


class ProfileOut(BaseModel):
    """A profile document as the API returns it."""

    agent_id: str
    user_id: str
    type: ProfileType
    status: ProfileStatus
    content: dict[str, Any]
    field_meta: dict[str, ItemMeta]
    version: int
    updated_at: datetime


class ProfileEventOut(BaseModel):
    """One change of a profile: the merge patch that turned version-1 into version."""

    version: int
    actor: str
    batch_id: int | None
    patch: dict[str, Any]
    meta_patch: dict[str, Any]
    created_at: datetime
