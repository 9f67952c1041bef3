"""Written from Settings: memoryd.env.example (every setting with its default) and the
reference table that ends docs/configuration.md (every variable, default and meaning).
Regenerate both with `python -m memoryd.env_example`; tests/test_settings.py fails when
either is stale."""

from __future__ import annotations

from pathlib import Path

from memoryd.settings import PARTS

ENV_EXAMPLE_HEADER = """\
# Every memoryd setting, with its default. Copy to memoryd.env, uncomment what you
# change; docker compose passes memoryd.env to every memoryd service (the database
# and broker URLs and the pool sizes are set in docker-compose.yml, which wins).
# Reference: docs/configuration.md. Regenerate: python -m memoryd.env_example
"""


def env_example() -> str:
    """memoryd.env.example: each setting as a commented variable set to its default."""
    lines = [ENV_EXAMPLE_HEADER.rstrip("\n")]
    for _, title, part in PARTS:
        lines += ["", f"# === {title} ==="]
        for name, field in part.model_fields.items():
            if field.description:
                lines.append(f"# {field.description}")
            lines.append(f"# MEMORYD_{name.upper()}={_as_set(field.default)}")
    return "\n".join(lines) + "\n"


def _as_set(default: object, unset: str = "") -> str:
    """A default as the variable would be written: booleans in lower case."""
    if default is None:
        return unset
    return str(default).lower() if isinstance(default, bool) else str(default)


ROOT = Path(__file__).resolve().parents[1]
ENV_EXAMPLE = ROOT / "memoryd.env.example"
CONFIGURATION_PAGE = ROOT / "docs" / "configuration.md"
REFERENCE_HEADING = "## Reference: every setting"
REFERENCE_NOTE = (
    "Generated from the stages' parts of `memoryd.settings.Settings` by `python -m"
    " memoryd.env_example`; the sections above say more of the settings that need it."
)


def reference() -> str:
    """The reference section: a table per stage, a row per setting with its default and
    its description."""
    tables = []
    for attribute, title, part in PARTS:
        rows = [
            f"### {title} (`settings.{attribute}`)",
            "",
            "| variable | default | meaning |",
            "|---|---|---|",
        ]
        for name, field in part.model_fields.items():
            shown = _as_set(field.default, unset="none")
            meaning = (field.description or "").replace("|", "\\|")
            rows.append(f"| `MEMORYD_{name.upper()}` | `{shown}` | {meaning} |")
        tables.append("\n".join(rows))
    return f"{REFERENCE_HEADING}\n\n{REFERENCE_NOTE}\n\n" + "\n\n".join(tables) + "\n"


def configuration_page(page: str) -> str:
    """The configuration page with its reference section written anew."""
    kept = page.split(REFERENCE_HEADING)[0].rstrip()
    return f"{kept}\n\n{reference()}"


if __name__ == "__main__":
    ENV_EXAMPLE.write_text(env_example())
    CONFIGURATION_PAGE.write_text(configuration_page(CONFIGURATION_PAGE.read_text()))
