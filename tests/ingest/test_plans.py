"""The ingest's reads of pending and claimed turns keep to their small partial indexes
on PostgreSQL once psycopg has prepared them (testkit/plans.py): a claim in a session
of months and the sweeper's look for stranded turns cost what is pending or in flight,
not every turn ever sent."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryd.ingest.sweeper import stranded_sessions
from memoryd.models.coordination import database_time
from memoryd.models.db import get_engine, session_scope
from testkit.plans import generic_plan, indexes_read, sent_with, statements_sent
from tests.conftest import make_settings
from tests.factories import turns_of_months
from tests.ingest.test_leases import claim, end


@pytest.mark.parametrize("backlog", [0, 9000], ids=["no backlog", "a backlog"])
def test_a_claim_in_a_session_of_months_reads_its_pending_turns_by_their_index(
    tmp_path: Path, request: pytest.FixtureRequest, backlog: int
) -> None:
    settings = make_settings("postgres", tmp_path, request)
    turns_of_months(settings, backlog)
    end(settings)
    with statements_sent(get_engine(settings.storage)) as sent:
        assert claim(settings) is not None

    statement, parameters = sent_with(sent, "FROM turns", "ORDER BY turns.id")
    plan = generic_plan(settings, statement, parameters)
    # Either index of pending turns (the backlog's is chosen while it is this small).
    read = indexes_read(plan)
    assert read and read <= {"ix_turns_pending", "ix_turns_pending_received"}, plan
    assert read == {"ix_turns_pending"} or not backlog, plan


@pytest.mark.parametrize("backlog", [0, 9000], ids=["no backlog", "a backlog"])
def test_the_sweepers_look_for_stranded_turns_reads_the_claimed_ones_only(
    tmp_path: Path, request: pytest.FixtureRequest, backlog: int
) -> None:
    settings = make_settings("postgres", tmp_path, request)
    turns_of_months(settings, backlog)
    engine = get_engine(settings.storage)
    with session_scope(settings.storage) as session, statements_sent(engine) as sent:
        stranded_sessions(session, database_time(session))

    statement, parameters = sent_with(sent, "FROM turns")
    plan = generic_plan(settings, statement, parameters)
    read = indexes_read(plan)
    assert "ix_turns_claimed" in read and "seq scan of turns" not in read, plan
