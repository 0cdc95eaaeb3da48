"""The pages a person opens first: `/`, which points to the board and the API documentation,
and `/docs`, a Swagger UI that reads the OpenAPI 3.1 document. Its assets come from the
installed fastapi-offline package, so `/docs` works where the server has no internet. The
hot routes' operations are added to FastAPI's document (`document`) from the same models
the routes read and reply with."""

from __future__ import annotations

import inspect
from html import escape
from http import HTTPStatus
from pathlib import Path
from typing import Any

import fastapi_offline
from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from pydantic import BaseModel, TypeAdapter
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.staticfiles import StaticFiles

from mainframe.api.hot import HotRoute
from mainframe.api.responses import REFUSED
from mainframe.contract.schemas import ErrorBody

ASSETS = "/docs-assets"
REF = "#/components/schemas/{model}"
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


def document(schema: dict[str, Any], routes: list[HotRoute]) -> None:
    """Add the hot routes' operations to an OpenAPI document FastAPI wrote, from the same
    models the routes read and reply with."""
    components: dict[str, Any] = schema.setdefault("components", {}).setdefault("schemas", {})
    paths: dict[str, Any] = schema.setdefault("paths", {})
    for route in routes:
        paths.setdefault(route.path, {})["post"] = _operation(route, components)


def _operation(route: HotRoute, components: dict[str, Any]) -> dict[str, Any]:
    name = route.declared.__name__
    reply = _content(route.reply_type, "serialization", components)
    refusal = _content(ErrorBody, "serialization", components)
    responses = {
        str(code): {"description": what, "content": reply} for code, what in route.answers.items()
    }
    for code in REFUSED:
        responses[str(code)] = {"description": HTTPStatus(code).phrase, "content": refusal}
    operation: dict[str, Any] = {
        "tags": [route.tag],
        "summary": name.replace("_", " ").title(),
        "description": inspect.cleandoc(route.declared.__doc__ or ""),
        "operationId": f"{name}_{route.path.strip('/').replace('/', '_')}_post",
        "parameters": _parameters(route),
        "responses": responses,
        # Intake takes a token, or none on an endpoint with open intake.
        "security": [{"HTTPBearer": []}, {}] if route.optional_token else [{"HTTPBearer": []}],
    }
    if route.body is not None:
        content = _content(route.body, "validation", components)
        operation["requestBody"] = {"required": True, "content": content}
    return operation


def _parameters(route: HotRoute) -> list[dict[str, Any]]:
    if route.params is None:
        return []
    properties = route.params.model_json_schema(ref_template=REF)["properties"]
    found = []
    for name, declared in route.params.model_fields.items():
        schema = dict(properties[name])
        description = schema.pop("description", None)
        where = "path" if name in route.param_convertors else "query"
        entry = {"name": name, "in": where, "required": declared.is_required(), "schema": schema}
        found.append(entry | ({"description": description} if description else {}))
    return found


def _content(model: Any, mode: Any, components: dict[str, Any]) -> dict[str, Any]:
    """`{"application/json": {"schema": ...}}` for `model`, its models among `components`."""
    found = TypeAdapter(model).json_schema(mode=mode, ref_template=REF)
    for key, value in found.pop("$defs", {}).items():
        components.setdefault(key, value)
    if isinstance(model, type) and issubclass(model, BaseModel):
        components.setdefault(model.__name__, found)
        found = {"$ref": REF.format(model=model.__name__)}
    return {"application/json": {"schema": found}}
