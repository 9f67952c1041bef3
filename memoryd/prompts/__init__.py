"""Versioned prompt files. `NAME.vN.md` holds a system part, a `---user---` line, a user part.

May import: nothing of memoryd.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources
from string import Template

USER_SEPARATOR = "---user---"


@dataclass(frozen=True)
class Prompt:
    version: str  # e.g. "extract.v1", recorded on every batch
    system: str
    user_template: Template

    def render(self, **values: str) -> list[dict[str, str]]:
        return [
            {"role": "system", "content": self.system},
            {"role": "user", "content": self.user_template.substitute(values)},
        ]


@cache
def load_prompt(version: str) -> Prompt:
    text = resources.files(__package__).joinpath(f"{version}.md").read_text(encoding="utf-8")
    system, sep, user = text.partition(f"\n{USER_SEPARATOR}\n")
    if not sep:
        raise ValueError(f"prompt {version}.md lacks the '{USER_SEPARATOR}' line")
    return Prompt(version=version, system=system.strip(), user_template=Template(user.strip()))
