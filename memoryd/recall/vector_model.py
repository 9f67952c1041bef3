"""Which embedding model wrote each vector.

Two models can give vectors of one size and unrelated meaning (MiniLM and e5: 384
dimensions each). Every model that writes vectors gets a `vector_models` row, and a
memory names the one that wrote its vector. Recall compares a question only with the
vectors of the model that embedded it; beat's fills embed again, memory by memory, the
vectors another model wrote. So a model change needs no reset and loses nothing: the
old vectors stay until each is replaced, only left out of comparisons meanwhile.

Vectors written before models were named (vector_model_id NULL) are taken as the first
recorded model's: compared by it, and named after it by its fills without a model call.
"""

from __future__ import annotations

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from memoryd.memo import RecentMemo
from memoryd.models.base import written_in
from memoryd.models.db import session_scope, utcnow
from memoryd.models.dialect import upsert
from memoryd.models.tables import Memory, MemoryStatus, VectorModel
from memoryd.recall.embedders import BUNDLED
from memoryd.settings import Settings

ADOPT_CHUNK = 5000
# Ids never change once given: kept for the process's life, by (database URL, name).
_ids: dict[tuple[str, str], int] = {}
_first: dict[str, int] = {}  # the first recorded model's id, by database URL
# (database URL, model id) whose fills have nothing from before models to name.
_adopted: set[tuple[str, int]] = set()
# A model no fill has used yet, and a database with no model recorded: asked again
# after this long.
_unknown: RecentMemo[bool] = RecentMemo(seconds=30.0, size=64)
_no_model: RecentMemo[bool] = RecentMemo(seconds=30.0, size=64)


def model_name(settings: Settings) -> str:
    """The model as vector_models names it: provider and model (a bundled one by its
    package and runtime, Bundled.name, whatever alias asked for it), not the endpoint's
    URL (a model moved to another server embeds as before)."""
    model = str(settings.recall.embedding_model)
    provider = settings.recall.embedding_provider
    if provider == "local" and model in BUNDLED:
        model = BUNDLED[model].name
    return f"{provider}:{model}"


def known_id(session: Session, settings: Settings, fresh: bool = False) -> int | None:
    """This settings' model's id, None while no fill has embedded with it (remembered
    for 30 s unless `fresh`)."""
    key = (settings.storage.resolved_database_url, model_name(settings))
    if key in _ids:
        return _ids[key]
    if _unknown.get(key) and not fresh:
        return None
    found = session.scalar(select(VectorModel.id).where(VectorModel.name == key[1]))
    if found is None:
        _unknown.put(key, True)
    else:
        _ids[key] = found
    return found


def fill_id(settings: Settings) -> int:
    """The id the fill writes beside its vectors (and refusals), the model's row made
    once the model has answered."""
    key = (settings.storage.resolved_database_url, model_name(settings))
    if key in _ids:
        return _ids[key]
    with session_scope(settings.storage, readonly=True) as session:
        found = known_id(session, settings)
    if found is not None:
        return found
    with session_scope(settings.storage) as session:
        insert = upsert(session)(VectorModel).values(name=key[1], first_used_at=utcnow())
        session.execute(insert.on_conflict_do_nothing(index_elements=["name"]))
        found = session.scalars(select(VectorModel.id).where(VectorModel.name == key[1])).one()
    _ids[key] = found  # only once committed: an id without its row would be reused
    _unknown.clear()
    return found


def first_id(session: Session, settings: Settings) -> int | None:
    """The first recorded model's id: the owner of the vectors from before models were
    named. None while no model is recorded (asked again every 30 s)."""
    url = settings.storage.resolved_database_url
    if url not in _first and not _no_model.get(url):
        found = session.scalar(select(func.min(VectorModel.id)))
        if found is None:
            _no_model.put(url, True)
            return None
        _first[url] = found
    return _first.get(url)


def compares_unnamed(session: Session, settings: Settings, model_id: int | None) -> bool:
    """Whether this model compares the vectors written before models were named: the
    first recorded model, or any model while none is recorded (a store just upgraded,
    whose vectors are compared as they always were until its first fill)."""
    first = first_id(session, settings)
    return first is None or model_id == first


def other_ids(session: Session, settings: Settings, model_id: int | None) -> list[int | None]:
    """The models whose vectors this one embeds again: every other recorded one, and
    None (before models were named) unless those are this model's own."""
    ids: list[int | None] = list(
        session.scalars(select(VectorModel.id).where(VectorModel.id != model_id)).all()
    )
    return ids if compares_unnamed(session, settings, model_id) else [None, *ids]


def adopt_unnamed(settings: Settings, model_id: int) -> int:
    """Name the first recorded model as the writer of the vectors from before models
    were named, in chunks over the index: no model call. Returns how many. Once none is
    left (or this model is not the first), a process asks no more: every vector written
    since names its model."""
    done = (settings.storage.resolved_database_url, model_id)
    named, after = 0, 0
    while done not in _adopted:
        with session_scope(settings.storage, readonly=True) as session:
            if not compares_unnamed(session, settings, model_id):
                _adopted.add(done)  # the first model is another: it names them
                break
            ids = session.scalars(
                select(Memory.id)
                .where(
                    Memory.status == written_in(MemoryStatus.ACTIVE),
                    Memory.vector.is_not(None),
                    Memory.vector_model_id.is_(None),
                    Memory.id > after,
                )
                .order_by(Memory.id)
                .limit(ADOPT_CHUNK)
            ).all()
        if not ids:
            _adopted.add(done)
            break
        with session_scope(settings.storage) as session:
            session.execute(
                update(Memory)
                .where(Memory.id.in_(ids), Memory.vector_model_id.is_(None))
                .values(vector_model_id=model_id)
            )
        named, after = named + len(ids), ids[-1]
    return named


def clear() -> None:
    """Forget the ids (tests that rebuild a database under the same URL)."""
    _ids.clear()
    _first.clear()
    _adopted.clear()
    _unknown.clear()
    _no_model.clear()
