"""/docs and /redoc in a real Chromium: every operation of the document is shown, and
the browser asks no host but this server for anything (scripts, styles, fonts, a
validator badge), nor breaks the pages' Content-Security-Policy."""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx
from playwright.sync_api import Browser, ConsoleMessage, Page, Request, expect

from tests.server.conftest import LiveServer


class Recorded:
    """Every request the page made and every console error (CSP violations among them)."""

    def __init__(self, page: Page) -> None:
        self.hosts: set[str] = set()
        self.errors: list[str] = []
        page.on("request", self._request)
        page.on("console", self._console)

    def _request(self, request: Request) -> None:
        url = urlsplit(request.url)
        if url.scheme not in ("data", "blob"):  # made in the page, never sent anywhere
            self.hosts.add(url.netloc)

    def _console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.errors.append(message.text)


def operations(live: LiveServer) -> list[tuple[str, str]]:
    doc = httpx.get(f"{live.url}/openapi.json", timeout=60).json()
    return [(method, path) for path, ops in doc["paths"].items() for method in ops]


def test_swagger_ui_shows_every_operation_from_this_server_alone(
    browser: Browser, live: LiveServer
) -> None:
    page = browser.new_page(base_url=live.url)
    seen = Recorded(page)
    page.goto("/docs")
    recall = page.locator(".opblock-post .opblock-summary-path[data-path='/v1/recall']")
    expect(recall).to_be_visible()
    expect(page.locator(".opblock")).to_have_count(len(operations(live)))
    expect(page.locator("button.authorize")).to_be_visible()  # Bearer keys can be tried
    recall.click()
    expect(page.locator(".opblock-post.is-open .parameters-container")).to_be_visible()
    assert seen.hosts == {urlsplit(live.url).netloc}
    assert seen.errors == []
    page.close()


def test_redoc_shows_every_operation_from_this_server_alone(
    browser: Browser, live: LiveServer
) -> None:
    page = browser.new_page(base_url=live.url)
    seen = Recorded(page)
    page.goto("/redoc")
    expect(page.get_by_role("heading", name="Ranked memories for a query")).to_be_visible()
    expect(page.locator("[data-section-id^='operation/']")).to_have_count(len(operations(live)))
    assert seen.hosts == {urlsplit(live.url).netloc}
    assert seen.errors == []
    page.close()
