"""The MEMORYD_* variable names memoryd knows, and a notice for any other: Settings
ignores a variable that is no setting, so a misspelt name would leave its setting at the
default without a word."""

from __future__ import annotations

import difflib
import logging
import os
from collections.abc import Mapping

from pydantic import AliasChoices
from pydantic.fields import FieldInfo

# memoryd.settings.FIELDS, passed in: this module and memoryd/settings, which calls it, do not
# import each other.
Fields = Mapping[str, FieldInfo]

log = logging.getLogger(__name__)

# MEMORYD_* variables read by something other than Settings, so none is a misspelling.
OTHER_VARIABLES = (
    "MEMORYD_TEST_PG",  # tests/conftest.py: the test suite's servers
    "MEMORYD_TEST_REDIS",
    "MEMORYD_TEST_REDIS_DB",
    "MEMORYD_TEST_AMQP_URL",
    "MEMORYD_BENCH_PG",  # bench/common.py: the benches' servers
    "MEMORYD_BENCH_REDIS",
    "MEMORYD_BENCH_LOCAL_MODEL",  # bench/quality_memoryd.py: the local model of its configurations
    "MEMORYD_BENCH_RERANK",  # bench/quality.py --rerank: the fused head reranked (top N)
    "MEMORYD_BENCH_JUDGE",  # bench/quality.py --judge: what the rerank server ranks by
    "MEMORYD_BENCH_NO_ANALYZE",  # bench/quality.py --no-analyze: PostgreSQL freshly loaded
    "MEMORYD_PG_SHARED_BUFFERS",  # docker-compose.yml: PostgreSQL's own settings
    "MEMORYD_PG_EFFECTIVE_CACHE_SIZE",
    "MEMORYD_PG_MAX_CONNECTIONS",
    "MEMORYD_URL",  # examples/node: where the example client finds the server
    "MEMORYD_KEY",
    "MEMORYD_MODELS_DIR",  # memoryd/llm/local_model.py: where fetched GGUF models are kept
)
PREFIX = "MEMORYD_"


def setting_variables(fields: Fields) -> list[str]:
    """The MEMORYD_* name of every setting (and of its aliases)."""
    names = []
    for name, field in fields.items():
        names.append(PREFIX + name.upper())
        if isinstance(field.validation_alias, AliasChoices):
            aliases = [a for a in field.validation_alias.choices if isinstance(a, str)]
            names += [a.upper() for a in aliases if a.upper().startswith(PREFIX)]
    return sorted(set(names))


def unknown_variables(environ: Mapping[str, str], fields: Fields) -> dict[str, str]:
    """A notice for each MEMORYD_* variable of `environ` that is neither a setting nor one
    of OTHER_VARIABLES, naming the closest known name if one is close."""
    known = setting_variables(fields)
    # Compared without the prefix every name shares, which would make any two look alike.
    stems = {name.removeprefix(PREFIX): name for name in (*known, *OTHER_VARIABLES)}
    notices = {}
    for variable in sorted(environ):
        name = variable.upper()  # Settings reads the environment case-insensitively
        if not name.startswith(PREFIX) or name in stems.values():
            continue
        close = difflib.get_close_matches(name.removeprefix(PREFIX), stems, n=1)
        hint = f"; did you mean {stems[close[0]]}?" if close else ", so it is ignored"
        notices[variable] = f"{variable} is not a memoryd setting{hint}"
    return notices


_warned: set[str] = set()


def warn_about_unknown_variables(fields: Fields, environ: Mapping[str, str] = os.environ) -> None:
    """Log each unknown MEMORYD_* variable once per process."""
    for variable, notice in unknown_variables(environ, fields).items():
        if variable not in _warned:
            _warned.add(variable)
            log.warning("%s", notice)
