"""What Settings checks of the values that name other systems (the database, the
broker, HTTP endpoints, the tracing extra), and how a URL is shown without its password.
Each check returns the value, or raises ValueError with the line a person reads."""

from __future__ import annotations

import importlib.util
import re

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

BROKER_SCHEMES = ("filesystem", "redis", "rediss", "amqp", "amqps", "pyamqp", "sqs", "memory")


def masked_url(url: str) -> str:
    """The URL with its password, if any, replaced by ***: safe to print or log."""
    url = re.sub(r"(://[^:/?#;\s]*:)[^;]*@", r"\1***@", url)  # up to the last @
    return _SECRET_PARAMETER.sub(r"\1***", url)


# Query parameters that carry a secret: password (sslpassword too), tokens, keys
# (key=, api_key=, private_key=), auth=, session ids, signatures.
_SECRET_PARAMETER = re.compile(
    r"(?i)([?&;][\w.-]*(?:password|passwd|pwd|secret|token|key|auth|sessionid|"
    r"signature|sig)=)[^&;#\s]*"
)


def database_url(value: str) -> str:
    if not value:
        return value
    try:
        url = make_url(value)
    except ArgumentError:
        # Not echoed: a URL that cannot be parsed cannot be trusted to be masked.
        raise ValueError(
            f"not a database URL (it begins {value.partition(':')[0][:20]!r}); expected e.g. "
            "postgresql+psycopg://user@host:5432/memoryd or sqlite:///path/memoryd.db"
        ) from None
    if url.get_backend_name() not in ("postgresql", "sqlite"):
        raise ValueError(f"{url.get_backend_name()!r} is not supported: use PostgreSQL or SQLite")
    return value


def broker_url(value: str) -> str:
    scheme = value.partition("://")[0]
    if not value or scheme not in BROKER_SCHEMES:
        raise ValueError(
            f"not a broker URL: {masked_url(value)!r}; expected one of "
            + ", ".join(f"{s}://" for s in BROKER_SCHEMES)
        )
    return value


def http_url(value: str | None) -> str | None:
    if value is not None and not value.startswith(("http://", "https://")):
        raise ValueError("must be an http:// or https:// URL, e.g. http://localhost:11434/v1")
    return value


def tracing_installed(value: bool) -> bool:
    try:  # found, not imported: that waits for the first span
        if not value or importlib.util.find_spec("opentelemetry.sdk") is not None:
            return value
    except ModuleNotFoundError:
        pass
    raise ValueError("needs OpenTelemetry: pip install 'memoryd[otel]'")
