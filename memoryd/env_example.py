"""memoryd.env.example, written from Settings: every setting with its default."""

from __future__ import annotations

from pathlib import Path

from memoryd.settings import Settings

ENV_EXAMPLE_HEADER = """\
# Every memoryd setting, with its default. Copy to memoryd.env, uncomment what you
# change; docker compose passes memoryd.env to every memoryd service (the database
# and broker URLs and the pool sizes are set in docker-compose.yml, which wins).
# Reference: README.md, Configuration. Regenerate: python -m memoryd.env_example
"""


def env_example() -> str:
    """memoryd.env.example: each setting as a commented variable set to its default."""
    lines = [ENV_EXAMPLE_HEADER]
    for name, field in Settings.model_fields.items():
        default = "" if field.default is None else field.default
        if isinstance(default, bool):
            default = str(default).lower()
        if field.description:
            lines.append(f"# {field.description}")
        lines.append(f"# MEMORYD_{name.upper()}={default}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    Path("memoryd.env.example").write_text(env_example())
