from memoryd.client import MemoryClient
from memoryd.extraction.batch import extract_session
from memoryd.models.keys import SessionKey


def test_offline_round_trip(settings):
    client = MemoryClient(settings, dispatch=False)
    client.enqueue_turn(
        agent_id="a",
        user_id="u",
        session_id="s",
        role="user",
        content="Please remember that I am allergic to peanuts.",
    )
    client.end_session("a", "u", "s")
    stats = extract_session(settings, SessionKey("a", "u", "s"))
    assert stats.created == 1
