"""The page's session in a real Chromium: the cookie is a session, not the key; another
site's form post is refused even with the cookie; sign-out and key revocation end the
session; every answer carries the security headers."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, expect
from sqlalchemy import select

from memoryd.client import MemoryClient
from memoryd.models.db import session_scope, utcnow
from memoryd.models.tables import ApiKey
from memoryd.server.keys import revoke_key
from memoryd.settings import Settings
from tests.server.conftest import LiveServer, make_key

# A loaded test machine can keep the server's thread from answering within httpx's
# default 5 s; a refusal is judged by what comes back, not by how fast.
_http = httpx.Client(timeout=60)

pytestmark = pytest.mark.usefixtures("browser")


class Elsewhere:
    """Another site on loopback (another port: the same *site* to a browser, so SameSite
    cookies go along) serving a form that posts to the page."""

    def __init__(self, target: str) -> None:
        form = (
            f'<form id="f" method="post" action="{target}"></form>'
            '<button id="go" onclick="document.getElementById(\'f\').submit()">go</button>'
        ).encode()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/html")
                self.end_headers()
                self.wfile.write(form)

            def log_message(self, *_args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"

    def close(self) -> None:
        self.server.shutdown()


@pytest.fixture
def signed_in(
    browser: Browser,
    live: LiveServer,
    api_settings: Settings,
) -> Iterator[tuple[Any, str]]:
    context = browser.new_context(base_url=live.url)
    page = context.new_page()
    key = make_key(api_settings, "ops", admin=True)
    page.goto("/login")
    page.fill("input[name=key]", key)
    page.click("button[type=submit]")
    expect(page.locator("#health-panel")).to_be_visible()
    yield page, key
    context.close()


def test_the_cookie_is_a_secure_session_not_the_key(signed_in: tuple[Any, str]) -> None:
    page, key = signed_in
    (cookie,) = [c for c in page.context.cookies() if c["name"] == "memoryd_session"]
    assert cookie["value"] != key and key not in cookie["value"]
    assert cookie["httpOnly"] and cookie["secure"] and cookie["sameSite"] == "Strict"
    assert cookie["expires"] > 0  # expires (page_session_hours), not a browser-life cookie


def test_another_sites_form_post_is_refused_even_with_the_cookie(
    signed_in: tuple[Any, str], live: LiveServer, api_settings: Settings
) -> None:
    page, _key = signed_in
    client = MemoryClient(api_settings, dispatch=False)
    memory = client.remember("bot", "ann", "Lives in Lisbon")
    elsewhere = Elsewhere(f"{live.url}/memories/{memory.id}/delete")
    try:
        page.goto(elsewhere.url)
        with page.expect_navigation():
            page.click("#go")
        assert "cross-origin" in page.content()
    finally:
        elsewhere.close()
    assert client.get("bot", "ann", memory.id).status == "active"
    # The same button on the page itself works.
    page.goto("/")
    page.on("dialog", lambda dialog: dialog.accept())
    page.locator(f"#memory-{memory.id}").get_by_role("button", name="Delete").click()
    expect(page.locator(f"#memory-{memory.id}")).to_contain_text("deleted")


def test_signing_out_and_revoking_the_key_end_the_session(
    browser: Browser,
    signed_in: tuple[Any, str],
    live: LiveServer,
    api_settings: Settings,
) -> None:
    page, key = signed_in
    cookies = page.context.cookies()
    page.click("form[action='/logout'] button")
    expect(page).to_have_url(re.compile(r"/login$"))
    replay = browser.new_context(base_url=live.url)  # the old cookie, kept by a thief
    replay.add_cookies(cookies)
    stolen = replay.new_page()
    stolen.goto("/")
    expect(stolen).to_have_url(re.compile(r"/login$"))
    replay.close()

    page.fill("input[name=key]", key)
    page.click("button[type=submit]")
    expect(page.locator("#health-panel")).to_be_visible()
    with session_scope(api_settings.storage) as session:
        key_id = session.scalars(select(ApiKey.id).where(ApiKey.name == "ops")).one()
        revoke_key(session, key_id, utcnow())
    page.reload()
    expect(page).to_have_url(re.compile(r"/login$"))


def test_every_answer_carries_the_security_headers(live: LiveServer) -> None:
    for path in ("/login", "/v1/health", "/static/page.css"):
        headers = _http.get(f"{live.url}{path}").headers
        assert "frame-ancestors 'none'" in headers["content-security-policy"], path
        assert "script-src 'self'" in headers["content-security-policy"], path
        assert headers["x-frame-options"] == "DENY"
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["referrer-policy"] == "no-referrer"
        # Nothing that can show what a user said is kept by a browser cache or a proxy.
        assert headers.get("cache-control") == (None if "/static/" in path else "no-store")


def test_a_proxys_basic_credentials_do_not_let_another_site_through(
    live: LiveServer, api_settings: Settings
) -> None:
    """A browser adds a proxy's Basic credentials by itself: with the session cookie
    along, the request is still the page's and must come from the page."""
    headers = {
        "authorization": "Basic b3BzOnNlY3JldA==",
        "cookie": "memoryd_session=whatever",
        "sec-fetch-site": "same-site",
    }
    refused = _http.post(f"{live.url}/logout", headers=headers)
    assert refused.status_code == 403 and "cross-origin" in refused.text
    api_call = _http.post(
        f"{live.url}/v1/recall",
        headers={"authorization": "Bearer mk_unknown", "sec-fetch-site": "cross-site"},
        json={"agent_id": "bot", "user_id": "ann", "query": "tea"},
    )
    assert api_call.status_code == 401  # an API call is judged by its key, not its origin


def test_answers_from_before_any_route_carry_the_headers_too(live: LiveServer) -> None:
    refused = _http.get(f"{live.url}/v1/health", params={"q": "a\x00b"})
    assert refused.status_code == 422
    assert "frame-ancestors 'none'" in refused.headers["content-security-policy"]
