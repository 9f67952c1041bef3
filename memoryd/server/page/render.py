"""Templates, language and the admin guard shared by the page's views and actions."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

from babel.dates import format_timedelta
from babel.numbers import format_decimal
from fastapi import Depends, Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates
from pydantic import ValidationError

from memoryd.models.db import session_scope, utcnow
from memoryd.models.schemas import MemoryOut
from memoryd.models.tables import Category, MemoryStatus, Tier
from memoryd.monitoring.browse import get_any
from memoryd.server.auth import page_principal
from memoryd.server.i18n import pick_language, translator
from memoryd.server.keys import Principal
from memoryd.server.page.wording import Wording
from memoryd.server.state import State

TEMPLATES = Jinja2Templates(directory=Path(__file__).parent.parent / "templates")
LANG_COOKIE = "memoryd_lang"

# (path, message key): the page's areas in the order the navigation shows them.
NAV: list[tuple[str, str]] = [
    ("/", "nav.memories"),
    ("/conflicts", "nav.conflicts"),
    ("/review", "nav.review"),
    ("/profiles", "nav.profiles"),
    ("/batches", "nav.batches"),
    ("/agents", "nav.agents"),
]


def memory_by_id(state: State, memory_id: int) -> MemoryOut:
    """Any memory (the page is for admins), with its scope for the calls that need one."""
    with session_scope(state.settings.storage, readonly=True) as session:
        return get_any(session, memory_id)


class LoginRequired(Exception):
    """No admin cookie: the page answers with the sign-in form."""


def admin(request: Request, state: State) -> Principal:
    principal = page_principal(request, state)
    if principal is None:
        raise LoginRequired
    return principal


PageAdmin = Annotated[Principal, Depends(admin)]


def age(t: Any, lang: str, when: datetime) -> str:
    """How long ago, in the page's language with its plural rules (Babel's CLDR data:
    "1 day ago", "2 days ago", "1天前"); under a minute, "just now"."""
    seconds = max((utcnow() - when).total_seconds(), 0)
    if seconds < 60:
        return str(t("age.now"))
    # threshold 1: the largest unit of which there is at least one ("50 minutes ago").
    ago = timedelta(seconds=-seconds)
    return format_timedelta(ago, threshold=1, add_direction=True, locale=lang)


def label_of(t: Any, kind: str, value: object) -> str:
    """A stored value's word in the page's language (i18n_labels: "category.user" is
    "用户"); a value without one (a page actor "page, key ops") is shown as it is."""
    key = f"{kind}.{value}"
    text = str(t(key))
    return str(value) if text == key else text


@dataclass
class Page:
    """Renders templates in the request's language."""

    request: Request

    @property
    def lang(self) -> str:
        r = self.request
        return pick_language(
            r.query_params.get("lang"), r.cookies.get(LANG_COOKIE), r.headers.get("accept-language")
        )

    def render(self, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        lang = self.lang
        t = translator(lang)
        response = TEMPLATES.TemplateResponse(
            self.request,
            template,
            {
                "t": t,
                "lang": lang,
                "nav": NAV,
                "age": lambda when: age(t, lang, when),
                "label_of": lambda kind, value: label_of(t, kind, value),
                "number": lambda n: format_decimal(n, locale=lang),
                "categories": [c.value for c in Category],
                "tiers": [x.value for x in Tier],
                "statuses": [s.value for s in MemoryStatus],
                **context,
            },
            status_code=status,
        )
        if self.request.query_params.get("lang") == lang:
            response.set_cookie(LANG_COOKIE, lang, max_age=365 * 86400, samesite="strict")
        return response

    @property
    def wording(self) -> Wording:
        """Errors in the page's language."""
        return Wording(self.lang)

    def invalid_fields(self, exc: ValidationError) -> str:
        """A form's validation error as the one line the page shows: "field: reason; …"."""
        return self.wording.invalid(exc.errors(include_url=False))

    def invalid(self, exc: ValidationError) -> HTMLResponse:
        """The error message fragment (422) naming each invalid field of a form."""
        return self.render(
            "_message.html", status=422, message=self.invalid_fields(exc), error=True
        )
