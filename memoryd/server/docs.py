"""Interactive API docs, /docs (Swagger UI) and /redoc (ReDoc), served whole by this
server: their scripts and styles come from the installed `fastapi-offline` package and
start from static/docs.js, so a browser asks no other host for anything and the pages
run under a Content-Security-Policy without inline scripts."""

from __future__ import annotations

from functools import cache
from html import escape
from pathlib import Path

import fastapi_offline
from fastapi import FastAPI
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

ASSETS_DIR = Path(fastapi_offline.__file__).with_name("static")
ASSETS_URL = "/docs-assets"
# ReDoc's sidebar footer always shows Redocly's logo from their CDN: that one address is
# pointed at nothing (the image hides itself when it fails to load).
REDOC_LOGO = b"https://cdn.redoc.ly/redoc/logo-mini.svg"

# Swagger UI sets style attributes; ReDoc also writes <style> elements and may start a
# worker from a blob. Scripts stay the server's own on both pages.
CSP = {
    "swagger": "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline';"
    " img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'",
    "redoc": "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline';"
    " img-src 'self' data:; worker-src 'self' blob:; object-src 'none'; base-uri 'none';"
    " frame-ancestors 'none'",
}
PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<link rel="icon" href="{assets}/favicon.png">
{head}
</head>
<body>
<div id="api-docs" data-ui="{ui}" data-openapi="{openapi}"></div>
<script src="{assets}/{script}"></script>
<script src="/static/docs.js"></script>
</body>
</html>
"""


def page(ui: str, title: str, openapi_url: str) -> HTMLResponse:
    swagger = ui == "swagger"
    html = PAGE.format(
        title=escape(title),
        assets=ASSETS_URL,
        head=f'<link rel="stylesheet" href="{ASSETS_URL}/swagger-ui.css">' if swagger else "",
        ui=ui,
        openapi=escape(openapi_url),
        script="swagger-ui-bundle.js" if swagger else "redoc.standalone.js",
    )
    return HTMLResponse(html, headers={"Content-Security-Policy": CSP[ui]})


@cache
def redoc_script() -> bytes:
    return (ASSETS_DIR / "redoc.standalone.js").read_bytes().replace(REDOC_LOGO, b"data:,")


def install(app: FastAPI) -> None:
    """/docs, /redoc and the files they load (none of them in the OpenAPI document)."""
    openapi_url = app.openapi_url or "/openapi.json"

    @app.get(f"{ASSETS_URL}/redoc.standalone.js", include_in_schema=False)
    def redoc_js() -> Response:
        return Response(redoc_script(), media_type="text/javascript")

    app.mount(ASSETS_URL, StaticFiles(directory=ASSETS_DIR), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    def swagger_ui() -> HTMLResponse:
        return page("swagger", f"{app.title} API", openapi_url)

    @app.get("/redoc", include_in_schema=False)
    def redoc() -> HTMLResponse:
        return page("redoc", f"{app.title} API", openapi_url)
