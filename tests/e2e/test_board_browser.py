"""The board in real headless Chromium against a real `mainframe serve`: sign in, watch a
scan become a dead letter when its only lease lapses, find it under Dead by search, open it,
redrive it and see it leave Dead; a form without its CSRF token refused; hostile sender text
shown as text. Set MAINFRAME_SCREENSHOTS=1 to refresh the README's screenshots in docs/."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import IN_CI
from tests.serverproc import ServerProcess, cli

playwright_api = pytest.importorskip("playwright.sync_api")
CHROMIUM = "/usr/bin/chromium"
DOCS = Path(__file__).resolve().parents[2] / "docs"
HOSTILE = "<script>window.__pwned=1</script>\u202egnp.exe"
LAPTOP = {"width": 1280, "height": 860}
PHONE = {"width": 390, "height": 844}

pytestmark = pytest.mark.slow


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    return DOCS if os.environ.get("MAINFRAME_SCREENSHOTS") == "1" else tmp_path


@pytest.fixture
def browser() -> Iterator[object]:
    if not Path(CHROMIUM).exists():
        if IN_CI:
            pytest.fail("Chromium is required in CI (.ci/run installs it)")
        pytest.skip("no /usr/bin/chromium")
    with playwright_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM)
        yield launched
        launched.close()


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def dead_count(page: object) -> int:
    page.reload()  # type: ignore[attr-defined]
    text = page.locator('[data-pill="dead"]').inner_text()  # type: ignore[attr-defined]
    return int(text)


def wait_for_dead(page: object, expected: int) -> None:
    for _ in range(100):
        if dead_count(page) == expected:
            return
        page.wait_for_timeout(200)  # type: ignore[attr-defined]
    raise AssertionError(f"the Dead pill never showed {expected}")


def test_an_operator_finds_and_redrives_a_dead_letter(
    tmp_path: Path, browser: object, shots: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'mainframe.db'}"
    env = {"MAINFRAME_JOB_TIMEOUT": "1", "MAINFRAME_MAX_JOB_ATTEMPTS": "1",
           "MAINFRAME_SWEEP_SECONDS": "0.3"}  # fmt: skip
    with ServerProcess(url, tmp_path, **env) as server:
        owner = server.stdout_path.read_text().strip().splitlines()[-1]
        cli(url, "endpoint", "create", "pypi", "--owner", "admin")
        cli(url, "endpoint", "create", "npm", "--owner", "admin")
        worker = cli(url, "token", "create", "--endpoint", "pypi", "--worker", "scanner-1")
        source = cli(url, "token", "create", "--endpoint", "pypi", "--source", "feed")
        with httpx.Client(base_url=server.url, timeout=10) as api:
            for name in ("lapsing-pkg", HOSTILE):
                body = {"name": name, "version": "1.0", "kind": "malware"}
                assert api.post("/api/v1/scans", json=body, headers=auth(source)).status_code == 201
            too_long = {"name": "x" * 10_240, "version": "1"}
            assert api.post("/api/v1/scans", json=too_long, headers=auth(source)).status_code == 422
            [lapsing] = api.post("/api/v1/jobs", headers=auth(worker)).json()  # never answered
            [hostile] = api.post("/api/v1/jobs", headers=auth(worker)).json()
            summary = ("<img src=x onerror=window.__pwned=2> \u202e" * 200)[:8000]
            assignment = hostile["assignment_id"]
            result = {"outcome": "failed", "attempt": 1, "assignment_id": assignment,
                      "summary": summary}  # fmt: skip
            api.post(f"/api/v1/jobs/{hostile['scan_id']}/result", json=result, headers=auth(worker))

            context = browser.new_context(viewport=LAPTOP)  # type: ignore[attr-defined]
            page = context.new_page()
            requests: list[str] = []
            page.on("request", lambda r: requests.append(r.url))
            page.goto(server.url + "/board")
            assert page.url.endswith("/board/sign-in")
            page.screenshot(path=str(shots / "board-sign-in.png"))
            page.get_by_label("Owner token").fill(owner)
            page.get_by_role("button", name="Sign in").click()
            page.wait_for_url(re.compile(r"/board$"))
            cookie = next(c for c in context.cookies() if c["name"] == "mf_session")
            assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and not cookie["secure"]

            wait_for_dead(page, 2)  # the lapsed lease, reaped by the sweeper; the failed result
            page.locator("nav.pills").get_by_role("link", name=re.compile(r"^Dead")).click()
            page.get_by_label("Search").fill("lapsing")
            page.get_by_role("button", name="Filter").click()
            assert "q=lapsing" in page.url and "status=dead" in page.url
            assert page.locator(".matched").inner_text() == "1"
            page.get_by_role("link", name="lapsing-pkg").click()
            assert page.get_by_text("lease expired").first.is_visible()
            assert page.locator("ol.timeline li").count() == 1
            page.screenshot(path=str(shots / "board-dead-letter.png"), full_page=True)
            page.get_by_role("button", name="Redrive").click()
            assert page.get_by_role("status").inner_text().startswith("Redriven")
            page.goto(server.url + "/board?status=dead")
            assert dead_count(page) == 1
            assert page.get_by_role("link", name="lapsing-pkg").count() == 0
            scan = api.get(f"/api/v1/scans/{lapsing['scan_id']}", headers=auth(owner)).json()
            assert scan["status"] == "QUEUED" and len(scan["attempts"]) == 1

            # Hostile text: shown as text, no script ran, nothing overflows a phone's width.
            page.screenshot(path=str(shots / "board-dead.png"), full_page=True)
            page.goto(server.url + f"/board/scans/{hostile['scan_id']}")
            # The override is shown as a marker the operator can see, never applied.
            shown = page.locator("h1").inner_text()
            assert "<script>window.__pwned=1</script>[U+202E]gnp.exe" in shown
            assert page.evaluate("window.__pwned") is None
            page.set_viewport_size(PHONE)
            assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
            page.goto(server.url + "/board?status=dead")
            assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
            page.screenshot(path=str(shots / "board-phone.png"), full_page=False)
            page.set_viewport_size(LAPTOP)

            # A redrive form whose CSRF token went missing is refused and changes nothing.
            page.goto(server.url + f"/board/scans/{hostile['scan_id']}")
            page.evaluate("document.querySelector('main input[name=csrf]').remove()")
            page.get_by_role("button", name="Redrive").click()
            assert "security token" in page.locator("main").inner_text()
            page.goto(server.url + "/board")
            assert dead_count(page) == 1

            # Keyboard: the skip link is the first stop and lands on the content.
            page.goto(server.url + "/board")
            page.keyboard.press("Tab")
            assert page.evaluate("document.activeElement.textContent") == "Skip to content"
            page.screenshot(path=str(shots / "board-overview.png"), full_page=True)
            assert all(r.startswith(server.url) for r in requests), "a request left the server"
            context.close()
    if shots == DOCS:
        shutil.rmtree(tmp_path, ignore_errors=True)
