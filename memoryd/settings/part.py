"""What every stage's part of Settings shares."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Part(BaseModel):
    """One stage's settings: frozen and hashable like Settings (extractors are cached by
    them), each field given by its name (aliases such as OPENAI_API_KEY are read from the
    environment by Settings), and no name it does not hold."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="forbid")
