"""What every stage's part of Settings shares."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

# What no setting needs to pass, and date arithmetic and SQL integers cannot: past it, a
# value validated at the start would fail every task that uses it instead (a lease of
# 1e12 seconds, a retention of 1e12 days, a limit past a 64-bit integer).
CENTURY = {"_seconds": 100 * 365 * 86_400, "_hours": 100 * 365 * 24, "_days": 100 * 365}
MOST = 2**31 - 1


class Part(BaseModel):
    """One stage's settings: frozen and hashable like Settings (extractors are cached by
    them), each field given by its name (aliases such as OPENAI_API_KEY are read from the
    environment by Settings), and no name it does not hold. No number is infinite, NaN
    or past what it can mean (CENTURY for a duration, MOST for anything else)."""

    model_config = ConfigDict(
        frozen=True, populate_by_name=True, extra="forbid", allow_inf_nan=False
    )

    @field_validator("*", mode="after")
    @classmethod
    def _within_reason(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return value
        name = info.field_name or ""
        most = next((n for unit, n in CENTURY.items() if name.endswith(unit)), MOST)
        if value > most:
            raise ValueError(f"at most {most:,}" + (" (a hundred years)" if most != MOST else ""))
        return value
