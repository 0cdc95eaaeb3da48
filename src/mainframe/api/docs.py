"""The pages a person opens first: `/`, which points to the board and the API documentation,
and `/docs`, a Swagger UI that reads the OpenAPI 3.1 document. Its assets come from the
installed fastapi-offline package, so `/docs` works where the server has no internet."""

from __future__ import annotations

from html import escape
from pathlib import Path

import fastapi_offline
from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.staticfiles import StaticFiles

ASSETS = "/docs-assets"
# Swagger UI 5 (OpenAPI 3.1), as fastapi-offline ships it.
ASSET_DIR = Path(fastapi_offline.__file__).parent / "static"
# Where a newcomer goes from `/`: the board, the API documentation, and the probes.
PLACES = {
    "board": ("/board", "the operator's board (sign in with an owner token)"),
    "docs": ("/docs", "the HTTP API, interactive"),
    "openapi": ("/openapi.json", "the OpenAPI document"),
    "health": ("/healthz", "liveness; /readyz for readiness, /metrics for Prometheus"),
}


def _home(request: Request) -> Response:
    if "text/html" not in request.headers.get("accept", ""):
        return JSONResponse({"service": "mainframe", **{k: p for k, (p, _) in PLACES.items()}})
    items = "".join(
        f'<li><a href="{path}">{escape(path)}</a>: {escape(what)}</li>'
        for path, what in PLACES.values()
    )
    return HTMLResponse(HOME.format(items=items))


# The board's stylesheet, header and card, so the first page looks like the rest.
HOME = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Mainframe</title>
<link rel="stylesheet" href="/board/static/board.css">
<link rel="icon" href="/board/static/favicon.svg" type="image/svg+xml">
</head>
<body>
<header class="top"><a class="brand" href="/">Mainframe</a></header>
<main id="main">
<article class="card">
<h1>Mainframe</h1>
<p class="muted">Package scans for a fleet of scanner workers.</p>
<ul>{items}</ul>
</article>
</main>
</body>
</html>
"""


def install(app: FastAPI) -> None:
    app.mount(ASSETS, StaticFiles(directory=ASSET_DIR), name="docs-assets")

    @app.get("/", include_in_schema=False)
    async def home(request: Request) -> Response:
        return _home(request)

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} API",
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS}/favicon.png",
        )
