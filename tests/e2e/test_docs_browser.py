"""`/docs` in real headless Chromium against a real `mainframe serve`, with every request
to another host refused: the whole API renders from the server's own assets (a Swagger UI
that reads OpenAPI 3.1), and `/` points a newcomer to the board and the docs."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.e2e import test_board_browser
from tests.serverproc import ServerProcess

pytestmark = pytest.mark.slow
browser = test_board_browser.browser  # Debian's Chromium through Playwright


def test_docs_render_every_operation_offline(tmp_path: Path, browser: object) -> None:
    url = f"sqlite:///{tmp_path / 'mainframe.db'}"
    with ServerProcess(url, tmp_path) as server:
        document = httpx.get(server.url + "/openapi.json", timeout=10).json()
        assert document["openapi"].startswith("3.1")
        operations = sum(len(methods) for methods in document["paths"].values())
        page = browser.new_page()  # type: ignore[attr-defined]
        elsewhere: list[str] = []

        def offline(route: object) -> None:
            target = route.request.url  # type: ignore[attr-defined]
            if urlsplit(target).hostname == "127.0.0.1":
                route.continue_()  # type: ignore[attr-defined]
            else:
                elsewhere.append(target)
                route.abort()  # type: ignore[attr-defined]

        page.route("**/*", offline)
        page.goto(server.url + "/docs")
        page.wait_for_selector(".opblock-summary-path", timeout=20_000)
        assert "Unable to render" not in page.content()
        shown = page.locator(".opblock").count()
        paths = page.locator(".opblock-summary-path").all_inner_texts()
        assert shown == operations and "/api/v1/jobs" in "".join(paths)
        assert elsewhere == []
        page.goto(server.url + "/")
        links = page.locator("a").evaluate_all("(as) => as.map((a) => a.getAttribute('href'))")
        assert "/board" in links and "/docs" in links
        page.close()
