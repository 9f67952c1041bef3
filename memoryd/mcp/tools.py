"""The MCP tools: the pydantic model of each one's arguments, and what each runs.

`memory_save` and `memory_recall` take the arguments of the agent tools of the same name
(memoryd/recall/tools.py: the same models, plus the scope) and run through
`MemoryClient.execute_tool`, so a model meets one tool whether it calls it by function
calling or over MCP. Every tool acts on one scope, `agent_id` and `user_id`, which the
caller's key must be allowed to read, or for a `write` tool to write. Nothing here needs
the MCP SDK.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Generic, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from memoryd.client import MemoryClient
from memoryd.errors import NotFound
from memoryd.models.checks import check_text
from memoryd.models.profiles import ProfileType
from memoryd.models.schemas import MAX_TOKEN_BUDGET, Ident, TurnKey
from memoryd.models.tables import SHARED_USER
from memoryd.recall.as_of import Moment
from memoryd.recall.tools import MemoryRecallArgs, MemorySaveArgs, recalled


class ScopeArgs(BaseModel):
    """The scope a call acts on. Unknown arguments are refused: a misspelt one must not
    vanish silently."""

    model_config = ConfigDict(extra="forbid")

    agent_id: Ident = Field(description="The agent whose memory this is")
    user_id: Ident = Field(description="The user it is about; '*' is the agent's shared scope")


class SaveArgs(MemorySaveArgs, ScopeArgs):
    model_config = ConfigDict(extra="forbid")


AS_OF = "A moment with a timezone: what memory held then (ranked by keywords, not logged)"


class RecallArgs(MemoryRecallArgs, ScopeArgs):
    model_config = ConfigDict(extra="forbid")

    as_of: Moment | None = Field(None, description=AS_OF)


def _query(value: str) -> str:
    return check_text(value, "query")


class ContextArgs(ScopeArgs):
    query: Annotated[str, AfterValidator(_query)] = Field(
        max_length=10_000, description="What the next reply is about: usually the user's message"
    )
    token_budget: int | None = Field(
        None, ge=1, le=MAX_TOKEN_BUDGET, description="Most tokens (default: the agent's budget)"
    )
    session_id: Ident | None = Field(
        None, description="The conversation, for the agent's injection rules"
    )
    profile: ProfileType | None = Field(
        None, description="Put this profile document first, within half the budget"
    )
    as_of: Moment | None = Field(None, description=AS_OF)


class ProfileArgs(ScopeArgs):
    type: ProfileType = Field(
        ProfileType.USER, description="'user': who the user is; 'work': their work"
    )


class ProfilePatchArgs(ProfileArgs):
    patch: dict[str, Any] = Field(
        description="A JSON Merge Patch (RFC 7396): objects merge, null removes a field, "
        "a list replaces the list"
    )


class SessionEndArgs(ScopeArgs):
    session_id: Ident = Field(description="The conversation that is over")


class TurnStatusArgs(ScopeArgs):
    turn_keys: list[TurnKey] = Field(
        min_length=1, max_length=100, description="The turn_key each turn was stored with"
    )
    wait: float = Field(
        0.0, ge=0, le=30, description="Seconds to wait for the turns to be extracted"
    )


Args = TypeVar("Args", bound=ScopeArgs)
Result = dict[str, Any]


@dataclass(frozen=True)
class Tool(Generic[Args]):
    name: str
    description: str
    model: type[Args]
    run: Callable[[MemoryClient, Args], Result]
    write: bool  # False: the key must be allowed to read the scope; True: to write it


def _agent_tool(name: str) -> Callable[[MemoryClient, ScopeArgs], Result]:
    """Run the agent tool `name` (client.execute_tool) with the arguments but the scope."""

    def run(client: MemoryClient, args: ScopeArgs) -> Result:
        arguments = args.model_dump(mode="json", exclude={"agent_id", "user_id"}, exclude_none=True)
        # The key check allowed this scope: writing the shared one is then meant.
        shared = args.user_id == SHARED_USER
        result = client.execute_tool(args.agent_id, args.user_id, name, arguments, shared=shared)
        if not result.pop("ok"):
            raise ValueError(result["error"])
        return result

    return run


def _recall(client: MemoryClient, args: RecallArgs) -> Result:
    """The agent tool memory_recall, or with `as_of` the same answer read from the past
    (which the agent tool, offered to models, does not take)."""
    if args.as_of is None:
        return _agent_tool("memory_recall")(client, args)
    categories = [args.type] if args.type else None
    hits = client.recall(
        args.query, args.agent_id, args.user_id, args.limit, categories, as_of=args.as_of
    )
    return {"memories": [recalled(hit) for hit in hits]}


def _context(client: MemoryClient, args: ContextArgs) -> Result:
    block = client.build_context(
        args.query,
        args.agent_id,
        args.user_id,
        args.token_budget,
        args.session_id,
        args.profile,
        as_of=args.as_of,
    )
    return {"context": block}


def _profile_read(client: MemoryClient, args: ProfileArgs) -> Result:
    return client.profile(args.agent_id, args.user_id, args.type).model_dump(mode="json")


def _profile_patch(client: MemoryClient, args: ProfilePatchArgs) -> Result:
    shared = args.user_id == SHARED_USER
    changed = client.patch_profile(
        args.agent_id, args.user_id, args.type, args.patch, shared=shared
    )
    return changed.model_dump(mode="json")


def _session_end(client: MemoryClient, args: SessionEndArgs) -> Result:
    if not client.end_session(args.agent_id, args.user_id, args.session_id):
        raise NotFound(f"no session {args.session_id!r} for that scope")
    return {"ended": True}


def _turn_status(client: MemoryClient, args: TurnStatusArgs) -> Result:
    found = client.wait_extracted(args.agent_id, args.user_id, args.turn_keys, args.wait)
    return {"turns": [r.model_dump(mode="json") for r in found]}


def _doc(model: type[BaseModel]) -> str:
    return (model.__doc__ or "").strip()


TOOLS: tuple[Tool[Any], ...] = (
    Tool("memory_save", _doc(MemorySaveArgs), SaveArgs, _agent_tool("memory_save"), True),
    Tool("memory_recall", _doc(MemoryRecallArgs), RecallArgs, _recall, False),
    Tool(
        "memory_context",
        "The <memory-context> block of what memory holds for a query, ready for the system "
        'prompt ("" when nothing relevant fits)',
        ContextArgs,
        _context,
        False,
    ),
    Tool(
        "profile_read",
        "The user's 'user' or 'work' profile document, with its version",
        ProfileArgs,
        _profile_read,
        False,
    ),
    Tool(
        "profile_patch",
        "Change part of a profile document with a JSON Merge Patch; returns the document",
        ProfilePatchArgs,
        _profile_patch,
        True,
    ),
    Tool(
        "session_end",
        "The conversation is over: extract memories from its remaining turns now",
        SessionEndArgs,
        _session_end,
        True,
    ),
    Tool(
        "turn_status",
        "Where turns stand after they were handed to memory (pending, claimed, done, failed, "
        "skipped) and, once extracted, the memories their batch produced; unknown keys are "
        "left out",
        TurnStatusArgs,
        _turn_status,
        False,
    ),
)
BY_NAME: dict[str, Tool[Any]] = {tool.name: tool for tool in TOOLS}
