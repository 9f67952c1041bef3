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


def test_no_query_names_a_scopes_user_by_hand() -> None:
    """A scoped table's user_id is compared only with another table's column (a join) or
    with a bound parameter of a statement built once (recall's postings): a value goes
    through Table.of or Table.readable_by."""
    by_hand = []
    for path in PACKAGE.rglob("*.py"):
        if "migrations" in path.parts or path.name == "base.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            compared = _user_column_compared(node)
            if compared is not None and not _a_column_or_parameter(compared):
                by_hand.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")  # type: ignore[attr-defined]
    assert by_hand == []


def _user_column_compared(node: ast.AST) -> ast.AST | None:
    """What `Table.user_id` is compared with (==, or .in_(…)), for a scoped Table."""
    if isinstance(node, ast.Compare) and _scoped_user(node.left):
        return node.comparators[0]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "in_"
        and _scoped_user(node.func.value)
    ):
        return node.args[0]
    return None


def _scoped_user(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "user_id"
        and isinstance(node.value, ast.Name)
        and node.value.id in SCOPED_TABLES
    )


def _a_column_or_parameter(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute) and node.attr == "user_id":
        return True  # another table's column: a join condition
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "bindparam"
    )
