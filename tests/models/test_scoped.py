"""Which rows a scope owns and may read is written once per table (models.base.Scoped):
the conditions select exactly those rows, and no query in the package names a scope's
user by hand."""

from __future__ import annotations

import ast
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from memoryd.models.base import SHARED_USER, Scoped
from memoryd.models.keys import Scope
from memoryd.models.tables import Memory
from memoryd.settings import Settings
from tests.factories import make_memory

PACKAGE = Path(__file__).resolve().parents[2] / "memoryd"
SCOPED_TABLES = {cls.__name__ for cls in Scoped.__subclasses__()}


def test_a_scope_owns_its_rows_and_reads_its_agents_shared_ones_too(
    settings: Settings, db: Session
) -> None:
    rows = {
        (agent, user): make_memory(db, settings, f"{agent} {user}", agent_id=agent, user_id=user)
        for agent in ("bot", "other-bot")
        for user in ("ann", "bob", SHARED_USER)
    }
    db.commit()

    def texts(condition: object) -> set[str]:
        return set(db.scalars(select(Memory.content).where(condition)))  # type: ignore[arg-type]

    ann, shared = Scope("bot", "ann"), Scope("bot", SHARED_USER)
    assert texts(Memory.of(ann)) == {rows["bot", "ann"].content}
    assert texts(Memory.readable_by(ann)) == {"bot ann", "bot *"}
    assert texts(Memory.readable_by(shared)) == texts(Memory.of(shared)) == {"bot *"}


def test_no_query_names_a_scope_by_hand() -> None:
    """A scoped table's agent_id or user_id is compared only with another scoped table's
    same column or a subquery's (a join), or with a bound parameter of a statement built
    once (recall's prepared postings): a value goes through Table.of, Table.readable_by
    or Table.matching."""
    by_hand = []
    for path in PACKAGE.rglob("*.py"):
        if "migrations" in path.parts or path.name == "base.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for column, other in _scope_column_compared(node):
                if not _a_join_or_parameter(column, other):
                    by_hand.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")  # type: ignore[attr-defined]
    assert by_hand == []


def test_the_source_check_sees_a_condition_written_by_hand() -> None:
    def passes(source: str) -> bool:
        compared = [
            pair for node in ast.walk(ast.parse(source)) for pair in _scope_column_compared(node)
        ]
        assert compared, source
        return all(_a_join_or_parameter(column, other) for column, other in compared)

    assert not passes("Memory.user_id == scope.user_id")
    assert not passes("scope.agent_id == Turn.agent_id")
    assert not passes("Profile.user_id.in_(users)")
    assert passes("Memory.user_id == Turn.user_id")
    assert passes("ChatSession.agent_id == pending.c.agent_id")
    assert passes("MemoryTerm.user_id.in_(bindparam('users', expanding=True))")


def _scope_column_compared(node: ast.AST) -> list[tuple[str, ast.AST]]:
    """(column name, what it is compared with) for each scoped table's agent_id or
    user_id that `node` compares (==, != or .in_(…)), on either side."""
    if isinstance(node, ast.Compare):
        left, right = node.left, node.comparators[0]
        return [
            (column, other)
            for side, other in ((left, right), (right, left))
            if (column := _scope_column(side))
        ]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "in_"
    ):
        column = _scope_column(node.func.value)
        return [(column, node.args[0])] if column else []
    return []


def _scope_column(node: ast.AST) -> str:
    if (
        isinstance(node, ast.Attribute)
        and node.attr in ("agent_id", "user_id")
        and isinstance(node.value, ast.Name)
        and node.value.id in SCOPED_TABLES
    ):
        return node.attr
    return ""


def _a_join_or_parameter(column: str, other: ast.AST) -> bool:
    if isinstance(other, ast.Attribute) and other.attr == column:
        owner = other.value
        if isinstance(owner, ast.Name) and owner.id in SCOPED_TABLES:
            return True  # another table's column
        if isinstance(owner, ast.Attribute) and owner.attr == "c":
            return True  # a subquery's column
    return (
        isinstance(other, ast.Call)
        and isinstance(other.func, ast.Name)
        and other.func.id == "bindparam"
    )
