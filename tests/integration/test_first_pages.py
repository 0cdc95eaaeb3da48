"""What a newcomer meets first, in process: `/` names the board and the docs (a page for a
browser, JSON for a script), and `/docs` loads a Swagger UI that reads OpenAPI 3.1 from this
server alone."""

from __future__ import annotations

from tests.integration.conftest import Api


def test_home_points_a_browser_to_the_board_and_the_docs(api: Api) -> None:
    page = api.client.get("/", headers={"Accept": "text/html,application/xhtml+xml"})
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'href="/board"' in page.text and 'href="/docs"' in page.text
    # Styled as the board is: its stylesheet, header and card.
    assert '<link rel="stylesheet" href="/board/static/board.css">' in page.text
    assert '<header class="top">' in page.text and '<article class="card">' in page.text
    assert api.client.get("/board/static/board.css").status_code == 200


def test_home_answers_a_script_in_json(api: Api) -> None:
    body = api.client.get("/").json()
    assert body["board"] == "/board" and body["docs"] == "/docs"
    assert body["openapi"] == "/openapi.json"


def test_docs_use_a_swagger_ui_that_reads_openapi_3_1(api: Api) -> None:
    assert api.client.get("/openapi.json").json()["openapi"].startswith("3.1")
    script = api.client.get("/docs-assets/swagger-ui-bundle.js")
    assert script.status_code == 200
    # Swagger UI reads OpenAPI 3.1 from version 5 on, through its OAS31 plugin (the bundle
    # 3.20 served before had none and refused the document; the browser test renders it).
    assert "OAS31" in script.text
    assert api.client.get("/docs-assets/favicon.png").status_code == 200
