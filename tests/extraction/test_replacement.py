"""Replacement and dedup at the scope sizes users reach: a new fact finds the memory it
contradicts or repeats among thousands, whether or not its prompt showed that memory."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from bench.replacement import run_scenario, say, store_filler
from bench.replacement_models import responder
from memoryd.client import MemoryClient
from memoryd.extraction.batch import extract_session
from memoryd.models import key_index
from memoryd.models.keys import Scope
from memoryd.models.tables import ExtractionBatch, Memory, MemoryStatus
from memoryd.recall import backfill
from memoryd.settings import Settings
from testkit.fakellm import FakeLLM, answer, parse_prompt
from tests.conftest import with_llm


def fact(content: str, name: str, *, single: bool, **more: object) -> dict[str, object]:
    return {"content": content, "name": name, "single": single, "confidence": 0.95, **more}


def statuses(db: Session) -> dict[str, str]:
    db.rollback()  # a new snapshot: what the batches since the last look wrote
    return {row.content: row.status for row in db.execute(select(Memory.content, Memory.status))}


def test_contradictions_retire_old_facts_under_5000_other_memories(
    settings: Settings, fake_llm: FakeLLM
) -> None:
    """bench/replacement.py's 5,000 case, at a reduced fact count: names, places,
    preferences, jobs and dates, each contradicted after 5,000 memories of real
    conversation; the scripted model names `replaces` only for memories it was shown."""
    outcome = run_scenario(with_llm(settings, fake_llm), size=5000, facts=8)
    assert (outcome.resolved, outcome.facts, outcome.duplicates) == (8, 8, 0)


def test_call_me_bob_after_250_memories_retires_sam(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    s = with_llm(settings, fake_llm)
    extract_session(s, say(s, "ann", "s1", "Call me Sam."))
    store_filler(s, Scope("bench", "ann"), 250, seed=0)
    extract_session(s, say(s, "ann", "s2", "Call me Bob."))
    prompt = fake_llm.requests[-1]["messages"][1]["content"]
    assert '"preferred name"' in prompt.split("<keys>")[1].split("</keys>")[0]
    found = statuses(db)
    assert found["Wants to be called Sam"] == MemoryStatus.SUPERSEDED
    assert found["Wants to be called Bob"] == MemoryStatus.ACTIVE


def test_a_single_valued_key_retires_an_unshown_memory_without_another_call(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    s = with_llm(settings, fake_llm, prefetch_limit=0)  # the prompt shows no memory
    fake_llm.push(answer({"facts": [fact("Lives in Lisbon", "home city", single=True)]}))
    extract_session(s, say(s, "ann", "s1", "I live in Lisbon."))
    fake_llm.push(answer({"facts": [fact("Lives in Porto", "Home City", single=True)]}))
    extract_session(s, say(s, "ann", "s2", "Big news: I moved to Porto last month."))
    assert fake_llm.calls == 2  # one per batch
    assert statuses(db) == {
        "Lives in Lisbon": MemoryStatus.SUPERSEDED,
        "Lives in Porto": MemoryStatus.ACTIVE,
    }


def test_a_list_like_key_is_settled_by_one_follow_up_call_for_the_batch(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    """Whether "Vegan since 2024" retires "Eats everything" or adds to it is the model's
    call: it is asked once, shown the unshown memories of the facts' keys."""
    s = with_llm(settings, fake_llm, prefetch_limit=0)
    fake_llm.push(
        answer(
            {
                "facts": [
                    fact("Eats everything", "diet", single=False),
                    fact("Likes sushi", "favourite foods", single=False),
                ]
            }
        )
    )
    extract_session(s, say(s, "ann", "s1", "I eat everything, sushi most of all."))
    fake_llm.push(
        answer(
            {
                "facts": [
                    fact("Vegan since 2024", "diet", single=False),
                    fact("Likes ramen", "favourite foods", single=False),
                ]
            }
        ),
        answer({"decisions": [{"fact": 1, "replaces": 100_001}, {"fact": 2, "replaces": None}]}),
    )
    extract_session(s, say(s, "ann", "s2", "I'm vegan since 2024. Ramen is great too."))
    follow_up = fake_llm.requests[-1]["messages"][1]["content"]
    facts = follow_up.split("<facts>\n")[1].split("\n</facts>")[0].splitlines()
    assert [json.loads(line)["content"] for line in facts] == ["Vegan since 2024", "Likes ramen"]
    assert "Eats everything" in follow_up and "Likes sushi" in follow_up
    assert statuses(db) == {
        "Eats everything": MemoryStatus.SUPERSEDED,
        "Likes sushi": MemoryStatus.ACTIVE,
        "Vegan since 2024": MemoryStatus.ACTIVE,
        "Likes ramen": MemoryStatus.ACTIVE,
    }
    batch = db.scalars(select(ExtractionBatch).order_by(ExtractionBatch.id.desc())).first()
    assert batch is not None and batch.llm_calls == 2


def test_a_dated_event_is_history_no_follow_up_retires(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    """A real small model's follow-up said a training plan replaces the race the user
    ran: an event dated to a day stays beside a value without one."""
    s = with_llm(settings, fake_llm, prefetch_limit=0)
    ran = "Ran my first half marathon on 2026-04-12"
    fake_llm.push(answer({"facts": [fact(ran, "running", single=False)]}))
    extract_session(s, say(s, "ann", "s1", "I ran my first half marathon last Sunday!"))
    fake_llm.push(
        answer({"facts": [fact("Runs four times a week", "running", single=False)]}),
        answer({"decisions": [{"fact": 1, "replaces": 100_001}]}),
    )
    extract_session(s, say(s, "ann", "s2", "Four runs a week max from now."))
    assert statuses(db) == {ran: MemoryStatus.ACTIVE, "Runs four times a week": MemoryStatus.ACTIVE}
    # A dated plan moved to another day is a change the follow-up may make.
    moved = "Dentist appointment moved to May 9"
    fake_llm.push(
        answer({"facts": [fact(moved, "running", single=False)]}),
        answer({"decisions": [{"fact": 1, "replaces": 100_001}]}),
    )
    extract_session(s, say(s, "ann", "s3", "The dentist moved me to May 9."))
    assert statuses(db)[ran] == MemoryStatus.SUPERSEDED


def test_a_follow_up_cannot_retire_a_memory_of_another_key(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    """Two unsettled facts of two keys in one call: each decision may only name a
    memory of its own fact's key, and only one the call showed."""
    s = with_llm(settings, fake_llm, prefetch_limit=0)
    fake_llm.push(
        answer(
            {
                "facts": [
                    fact("Plays chess", "hobbies", single=False),
                    fact("Likes sushi", "favourite foods", single=False),
                ]
            }
        )
    )
    extract_session(s, say(s, "ann", "s1", "I play chess and like sushi."))
    fake_llm.push(
        answer(
            {
                "facts": [
                    fact("Plays go", "hobbies", single=False),
                    fact("Likes ramen", "favourite foods", single=False, replaces=1),
                ]
            }
        ),
        answer({"decisions": [{"fact": 1, "replaces": 100_002}, {"fact": 2, "same_as": 100_001}]}),
    )
    extract_session(s, say(s, "ann", "s2", "I play go as well, and like ramen."))
    follow_up = fake_llm.requests[-1]["messages"][1]["content"]
    assert '"id": 100001' in follow_up and '"id": 100002' in follow_up  # both keys asked
    assert set(statuses(db).values()) == {MemoryStatus.ACTIVE}
    assert len(statuses(db)) == 4


def test_a_short_lived_fact_never_retires_a_lasting_value_unasked(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    s = with_llm(settings, fake_llm, prefetch_limit=0)
    MemoryClient(s, dispatch=False).remember("bench", "ann", "Works at Acme", name="employer")
    fake_llm.push(
        answer(
            {"facts": [fact("Works at Globex for now", "employer", single=True, temporary="short")]}
        )
    )
    extract_session(s, say(s, "ann", "s1", "I'm covering at Globex this week."))
    assert statuses(db) == {
        "Works at Acme": MemoryStatus.ACTIVE,
        "Works at Globex for now": MemoryStatus.ACTIVE,
    }


def test_an_id_the_prompt_did_not_show_retires_nothing(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    """The model names ids it was never shown, in its answer: nothing is retired, even
    where the follow-up gave that number to a memory."""
    s = with_llm(settings, fake_llm, prefetch_limit=0)
    fake_llm.push(answer({"facts": [fact("Plays chess", "hobbies", single=False)]}))
    extract_session(s, say(s, "ann", "s1", "I play chess."))
    fake_llm.push(
        answer({"facts": [fact("Plays go", "hobbies", single=False, replaces=100_001, same_as=1)]}),
        answer({"decisions": []}),
    )
    extract_session(s, say(s, "ann", "s2", "I play go."))
    assert statuses(db) == {"Plays chess": MemoryStatus.ACTIVE, "Plays go": MemoryStatus.ACTIVE}


def test_a_confirmation_gives_a_memory_saved_without_a_key_the_facts_key(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    MemoryClient(settings, dispatch=False).remember("bench", "ann", "Lives in Porto")
    s = with_llm(settings, fake_llm, prefetch_limit=0)
    fake_llm.push(answer({"facts": [fact("Lives in Porto", "home city", single=True)]}))
    extract_session(s, say(s, "ann", "s1", "I live in Porto."))
    fake_llm.push(answer({"facts": [fact("Lives in Braga", "home city", single=True)]}))
    extract_session(s, say(s, "ann", "s2", "I moved to Braga."))
    assert statuses(db) == {
        "Lives in Porto": MemoryStatus.SUPERSEDED,
        "Lives in Braga": MemoryStatus.ACTIVE,
    }


def test_a_near_duplicate_is_found_past_the_most_recent_memories(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    s = with_llm(settings, fake_llm)
    extract_session(s, say(s, "ann", "s1", "I really like green tea in the morning."))
    store_filler(s, Scope("bench", "ann"), 300, seed=7)
    extract_session(s, say(s, "ann", "s2", "I really like green tea in the mornings!"))
    kept = db.scalars(select(Memory).where(Memory.content.like("%green tea%"))).all()
    assert [(m.content, m.evidence_count) for m in kept] == [
        ("Prefers green tea in the morning", 2)
    ]


def test_a_memory_saved_by_hand_with_a_key_is_found_by_it(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    client = MemoryClient(settings, dispatch=False)
    client.remember("bench", "ann", "Works at Acme", name="Employer")
    s = with_llm(settings, fake_llm, prefetch_limit=0)
    fake_llm.push(answer({"facts": [fact("Works at Globex", "employer", single=True)]}))
    extract_session(s, say(s, "ann", "s1", "I work at Globex now."))
    assert statuses(db) == {
        "Works at Acme": MemoryStatus.SUPERSEDED,
        "Works at Globex": MemoryStatus.ACTIVE,
    }


def test_a_saved_near_duplicate_is_found_past_the_most_recent_memories(
    settings: Settings, db: Session
) -> None:
    client = MemoryClient(settings, dispatch=False)
    first = client.remember("bench", "ann", "Prefers green tea in the morning")
    store_filler(settings, Scope("bench", "ann"), 300, seed=3)
    again = client.remember("bench", "ann", "Prefers green tea in the mornings!")
    assert again.id == first.id and again.evidence_count == 2


@pytest.mark.parametrize("model", ["synonym", "no-key"])
def test_a_fact_named_otherwise_or_not_at_all_retires_the_old_one_under_1500_memories(
    settings: Settings, fake_llm: FakeLLM, model: str
) -> None:
    """bench/replacement.py's synonym and no-key models, reduced: the later facts come
    under another name of their subject (English paraphrase, word order, Chinese) or
    none, linked to nothing, after 1,500 newer memories of other subjects."""
    fake_llm.responder = responder(model)
    outcome = run_scenario(with_llm(settings, fake_llm), size=1500, facts=14, model=model)
    assert (outcome.resolved, outcome.facts, outcome.duplicates) == (14, 14, 0)
    assert outcome.later_calls <= 2 * outcome.later_batches  # one follow-up at most


def keys_offered(fake_llm: FakeLLM) -> list[str]:
    prompt = fake_llm.requests[-1]["messages"][1]["content"]
    return json.loads(prompt.split("<keys>\n")[1].split("\n</keys>")[0])


def test_an_old_key_is_offered_after_1500_newer_memories(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    s = with_llm(settings, fake_llm)
    extract_session(s, say(s, "ann", "s1", "My gym is FitLab."))
    store_filler(s, Scope("bench", "ann"), 1500, seed=0)  # 1,500 newer, other keys
    extract_session(s, say(s, "ann", "s2", "Since May my gym is Iron Temple."))
    assert keys_offered(fake_llm)[0] == "gym"


def test_the_synonym_rule_lands_a_fact_on_the_scopes_key_and_records_the_alias(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    s = with_llm(settings, fake_llm, prefetch_limit=0)
    fake_llm.push(answer({"facts": [fact("Lives in Lisbon", "home city", single=True)]}))
    extract_session(s, say(s, "ann", "s1", "I live in Lisbon."))
    fake_llm.push(answer({"facts": [fact("住在波尔图", "居住城市", single=True)]}))
    extract_session(s, say(s, "ann", "s2", "下个月起我人就在波尔图了。"))
    assert fake_llm.calls == 2  # the rule needs no follow-up
    assert statuses(db) == {"Lives in Lisbon": "superseded", "住在波尔图": "active"}
    assert key_index.aliases(db, Scope("bench", "ann")) == {"居住城市": "home city"}


def test_a_key_in_the_same_words_lands_on_the_scopes_key_without_a_call(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    """Real answers of a small model: "diet update" for "diet", "project side project"
    for "side project"."""
    s = with_llm(settings, fake_llm, prefetch_limit=0)
    fake_llm.push(answer({"facts": [fact("Is vegan", "diet", single=True)]}))
    extract_session(s, say(s, "ann", "s1", "I'm vegan."))
    fake_llm.push(
        answer({"facts": [fact("Eats eggs and cheese again", "diet update", single=False)]})
    )
    extract_session(s, say(s, "ann", "s2", "Diet update: I eat eggs and cheese again."))
    assert fake_llm.calls == 2  # no follow-up
    assert statuses(db) == {"Is vegan": "superseded", "Eats eggs and cheese again": "active"}
    assert key_index.aliases(db, Scope("bench", "ann")) == {"diet update": "diet"}


def test_a_close_key_is_linked_by_the_follow_up_and_later_facts_follow_the_alias(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    s = with_llm(settings, fake_llm, prefetch_limit=0)
    fake_llm.push(answer({"facts": [fact("Trains at FitLab", "gym", single=True)]}))
    extract_session(s, say(s, "ann", "s1", "I train at FitLab."))
    fake_llm.push(
        answer({"facts": [fact("Trains at Iron Temple", "gym membership", single=True)]}),
        answer({"decisions": [{"fact": 1, "replaces": 100_001}]}),
    )
    extract_session(s, say(s, "ann", "s2", "I switched to Iron Temple."))
    follow_up = fake_llm.requests[-1]["messages"][1]["content"]
    assert "Trains at FitLab" in follow_up
    assert key_index.aliases(db, Scope("bench", "ann")) == {"gym membership": "gym"}
    fake_llm.push(answer({"facts": [fact("Trains at Gym Nine", "gym membership", single=True)]}))
    extract_session(s, say(s, "ann", "s3", "Now it's Gym Nine."))
    assert fake_llm.calls == 4  # the alias needs no follow-up
    assert statuses(db) == {
        "Trains at FitLab": "superseded",
        "Trains at Iron Temple": "superseded",
        "Trains at Gym Nine": "active",
    }
    names = set(db.scalars(select(Memory.name_key).where(Memory.status == "active")))
    assert names == {"gym"}


def test_a_close_key_the_model_does_not_link_stays_a_key_of_its_own(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    """Similar words alone never merge two keys: "favourite food" and "food I cook"."""
    s = with_llm(settings, fake_llm, prefetch_limit=0)
    fake_llm.push(
        answer({"facts": [fact("Favourite food is ramen", "favourite food", single=True)]})
    )
    extract_session(s, say(s, "ann", "s1", "My favourite food is ramen."))
    fake_llm.push(
        answer({"facts": [fact("Cooks dal most weeks", "food i cook", single=True)]}),
        answer({"decisions": [{"fact": 1, "replaces": None, "same_as": None}]}),
    )
    extract_session(s, say(s, "ann", "s2", "I cook dal most weeks."))
    assert fake_llm.calls == 3
    assert set(statuses(db).values()) == {"active"}
    assert key_index.aliases(db, Scope("bench", "ann")) == {}


def test_with_embeddings_a_key_sharing_no_word_is_a_candidate_by_meaning(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    """ "beverage" and "what i have at breakfast" share no word and no synonym rule: the
    memory nearest the fact's meaning brings its key to the follow-up."""
    s = with_llm(settings, fake_llm, embedding_model="text-embedding-3-small", prefetch_limit=0)
    said = {
        "I drink green tea every morning.": fact(
            "Drinks green tea every morning", "beverage", single=True
        ),
        "These days it is black tea every morning.": fact(
            "Drinks black tea every morning", "what i have at breakfast", single=True
        ),
    }

    def respond(messages: list[dict[str, Any]]) -> str:
        text = messages[-1]["content"]
        if "<facts>" in text:
            _turns, shown = parse_prompt(messages)
            green = next(a for a, (_n, c) in shown.items() if "green tea" in c)
            return json.dumps({"decisions": [{"fact": 1, "replaces": green}]})
        turns, _shown = parse_prompt(messages)
        return json.dumps({"facts": [said[content] for _role, content in turns]})

    fake_llm.responder = respond
    extract_session(s, say(s, "ann", "s1", "I drink green tea every morning."))
    assert backfill.fill_missing(s) == 1
    extract_session(s, say(s, "ann", "s2", "These days it is black tea every morning."))
    assert statuses(db) == {
        "Drinks green tea every morning": "superseded",
        "Drinks black tea every morning": "active",
    }
    assert key_index.aliases(db, Scope("bench", "ann")) == {"what i have at breakfast": "beverage"}


def test_a_single_key_retires_its_value_filed_under_the_other_category_about_the_user(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    """A real small model filed "job title" under `user` one day, `project` the next."""
    s = with_llm(settings, fake_llm, prefetch_limit=0)
    fake_llm.push(answer({"facts": [fact("Chemist at Novartis", "job title", single=True)]}))
    extract_session(s, say(s, "ann", "s1", "Novartis hired me as a chemist."))
    switched = fact("Chemist at Roche", "job title", single=True, category="project")
    fake_llm.push(answer({"facts": [switched]}))
    extract_session(s, say(s, "ann", "s2", "Roche took me on instead, same role."))
    assert statuses(db) == {"Chemist at Novartis": "superseded", "Chemist at Roche": "active"}
