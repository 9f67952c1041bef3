"""Which embedding model wrote each vector.

Two models can give vectors of one size and unrelated meaning (MiniLM and e5: 384
dimensions each). Every model that writes vectors gets a `vector_models` row, and a
memory names the one that wrote its vector. Recall compares a question only with the
vectors of the model that embedded it; the fill embeds again, memory by memory, the
vectors another model wrote. So a model change needs no reset and loses nothing: the
old vectors stay until each is replaced, only left out of comparisons meanwhile.
Vectors written before models were named (vector_model_id NULL) are compared, as they
always were, and embedded again by the next fills.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from memoryd.memo import RecentMemo
from memoryd.models.db import session_scope, utcnow
from memoryd.models.dialect import upsert
from memoryd.models.tables import VectorModel
from memoryd.recall.embedders import BUNDLED
from memoryd.settings import Settings

# A model's id never changes once given: kept for the process's life.
_ids: dict[tuple[str, str], int] = {}
# A model no fill has used yet: asked again after this long.
_unknown: RecentMemo[bool] = RecentMemo(seconds=30.0, size=64)


def model_name(settings: Settings) -> str:
    """The model as vector_models names it: provider and model (a bundled one by its
    package, whatever alias asked for it), not the endpoint's URL (a model moved to
    another server embeds as before)."""
    model = str(settings.recall.embedding_model)
    provider = settings.recall.embedding_provider
    if provider == "local" and model in BUNDLED:
        model = BUNDLED[model].package
    return f"{provider}:{model}"


def known_id(session: Session, settings: Settings) -> int | None:
    """This settings' model's id, None while no fill has written a vector with it."""
    key = (settings.storage.resolved_database_url, model_name(settings))
    if key in _ids:
        return _ids[key]
    if _unknown.get(key):
        return None
    found = session.scalar(select(VectorModel.id).where(VectorModel.name == key[1]))
    if found is None:
        _unknown.put(key, True)
    else:
        _ids[key] = found
    return found


def fill_id(settings: Settings) -> int:
    """The id the fill writes beside its vectors, the model's row made on first use."""
    key = (settings.storage.resolved_database_url, model_name(settings))
    if key not in _ids:
        with session_scope(settings.storage) as session:
            insert = upsert(session)(VectorModel).values(name=key[1], first_used_at=utcnow())
            session.execute(insert.on_conflict_do_nothing(index_elements=["name"]))
            _ids[key] = session.scalars(
                select(VectorModel.id).where(VectorModel.name == key[1])
            ).one()
        _unknown.clear()
    return _ids[key]


def other_ids(session: Session, model_id: int | None) -> list[int | None]:
    """The ids of the models other than `model_id` (every one for None), and None:
    vectors written before models were named."""
    ids = session.scalars(select(VectorModel.id).where(VectorModel.id != model_id)).all()
    return [None, *ids]


def clear() -> None:
    """Forget the ids (tests that rebuild a database under the same URL)."""
    _ids.clear()
    _unknown.clear()
