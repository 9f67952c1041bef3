"""HTTP API fixtures: the real ASGI app on the test's database (both backends), real
API keys, and a real uvicorn server on loopback for the browser, Node and schemathesis."""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import uvicorn
from fastapi.testclient import TestClient
from playwright.sync_api import Browser, Page, expect, sync_playwright

from memoryd.client import MemoryClient
from memoryd.models.db import session_scope, utcnow
from memoryd.server.app import create_app
from memoryd.server.keys import KeySpec, create_key
from memoryd.settings import Settings

# Four test processes share two cores: a page that renders in a second alone can take
# longer than Playwright's 5 s default. What the page must show stays the same.
expect.set_options(timeout=30_000)


@dataclass
class Keys:
    admin: str
    bot: str  # agent "bot", any user
    ann: str  # agent "bot", user "ann" only


def make_key(settings: Settings, name: str, **spec: object) -> str:
    with session_scope(settings.storage) as session:
        _, secret = create_key(session, KeySpec(name=name, **spec), utcnow())  # type: ignore[arg-type]
    return secret


@pytest.fixture
def api_settings(settings: Settings) -> Settings:
    # Keys are looked up on every request, so a revocation shows at once.
    return settings.updated(**{"api_key_cache_seconds": 0.0})


@pytest.fixture
def keys(api_settings: Settings) -> Keys:
    return Keys(
        admin=make_key(api_settings, "ops", admin=True),
        bot=make_key(api_settings, "bot", agent_ids=["bot"]),
        ann=make_key(api_settings, "ann", agent_ids=["bot"], user_id="ann"),
    )


@pytest.fixture
def api(api_settings: Settings) -> Iterator[TestClient]:
    """The app in process (httpx through ASGI); turns are left to beat's sweep."""
    app = create_app(api_settings, client=MemoryClient(api_settings, dispatch=False))
    # https: the page's session cookie is Secure, and httpx sends it over TLS only.
    with TestClient(app, base_url="https://testserver", raise_server_exceptions=False) as client:
        yield client


def sign_in(http: TestClient, key: str) -> None:
    """Sign the page in, as its form does: the session cookie is kept by `http`."""
    response = http.post("/login", data={"key": key}, follow_redirects=False)
    assert response.status_code == 303, response.text


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


class LiveServer:
    """uvicorn serving the app on a spare loopback port, in a thread of this process."""

    def __init__(self, settings: Settings) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = int(sock.getsockname()[1])
        app = create_app(settings, client=MemoryClient(settings, dispatch=False))
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *_exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture
def live(api_settings: Settings) -> Iterator[LiveServer]:
    with LiveServer(api_settings) as server:
        yield server


CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's Chromium, never a downloaded browser: one per test module."""
    if not CHROMIUM.exists():
        pytest.fail("the page tests need Chromium: run `apt-get install -y chromium`")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Browser, live: LiveServer, api_settings: Settings) -> Iterator[Page]:
    """The memory page, signed in with an admin key."""
    context = browser.new_context(base_url=live.url, viewport={"width": 1200, "height": 900})
    page = context.new_page()
    page.goto("/")
    expect(page).to_have_url(re.compile(r"/login$"))
    page.fill("input[name=key]", make_key(api_settings, "ops", admin=True))
    page.click("button[type=submit]")
    expect(page.locator("#health-panel")).to_be_visible()
    yield page
    context.close()
