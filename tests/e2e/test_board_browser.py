"""The board in real headless Chromium against a real `mainframe serve`: sign in, watch a
scan become a dead letter when its only lease lapses, find it under Dead by search, open it,
redrive it and see it leave Dead; a form without its CSRF token refused; hostile sender text
shown as text; a reload after issuing a credential issues none; a notice in the URL shows
nothing; a focus ring that stands out from white; a redrive done with the keyboard alone; a
source gone quiet marked on its endpoint's page.
Set MAINFRAME_SCREENSHOTS=1 to refresh the screenshots in docs/ (docs/board.md shows them)."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import IN_CI
from tests.polling import wait_for
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
            page.get_by_role("link", name=re.compile(r"^Redrive #")).click()
            page.get_by_role("button", name=re.compile(r"^Redrive #")).click()
            assert "redriven" in page.get_by_role("status").inner_text()
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
            page.goto(server.url + f"/board/scans/{hostile['scan_id']}/redrive")
            page.evaluate("document.querySelector('main input[name=csrf]').remove()")
            page.get_by_role("button", name=re.compile(r"^Redrive #")).click()
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


def _luminance(rgb: tuple[int, ...]) -> float:
    """WCAG 2 relative luminance of an sRGB colour."""
    lin = [c / 255 / 12.92 if c <= 10 else ((c / 255 + 0.055) / 1.055) ** 2.4 for c in rgb[:3]]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(a: tuple[int, ...], b: tuple[int, ...]) -> float:
    light, dark = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def tab_to(page: object, name: re.Pattern[str], *, presses: int = 80) -> None:
    """Press Tab until the focused element's text matches `name`, as a keyboard user would."""
    for _ in range(presses):
        page.keyboard.press("Tab")  # type: ignore[attr-defined]
        focused = page.evaluate("document.activeElement.innerText || ''")  # type: ignore[attr-defined]
        if name.search(focused):
            return
    raise AssertionError(f"no element named {name.pattern!r} within {presses} Tab presses")


@pytest.fixture(scope="module")
def board_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """One server for the keyboard and credential checks, with an owner, two dead letters
    and a worker; yields its URL and tokens."""
    tmp = tmp_path_factory.mktemp("board")
    url = f"sqlite:///{tmp / 'mainframe.db'}"
    with ServerProcess(url, tmp, MAINFRAME_MAX_JOB_ATTEMPTS="1") as server:
        owner = server.stdout_path.read_text().strip().splitlines()[-1]
        cli(url, "endpoint", "create", "pypi-malware", "--owner", "admin")
        worker = cli(url, "token", "create", "--endpoint", "pypi-malware", "--worker", "w1")
        source = cli(url, "token", "create", "--endpoint", "pypi-malware", "--source", "feed")
        with httpx.Client(base_url=server.url, timeout=10) as api:
            for name in ("keyboard-pkg", "other-pkg"):
                body = {"name": name, "version": "2.0"}
                assert api.post("/api/v1/scans", json=body, headers=auth(source)).status_code == 201
                [job] = api.post("/api/v1/jobs", headers=auth(worker)).json()
                result = {"outcome": "failed", "attempt": 1, "assignment_id": job["assignment_id"],
                          "summary": "Traceback\nOSError: sandbox died"}  # fmt: skip
                api.post(f"/api/v1/jobs/{job['scan_id']}/result", json=result, headers=auth(worker))
        yield {"url": server.url, "owner": owner, "worker": worker, "source": source}


def signed_in(browser: object, server: dict[str, str]) -> object:
    context = browser.new_context(viewport=LAPTOP)  # type: ignore[attr-defined]
    page = context.new_page()
    page.goto(server["url"] + "/board/sign-in")
    page.get_by_label("Owner token").fill(server["owner"])
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(r"/board$"))
    return page


def test_reloading_after_issuing_a_credential_issues_none(
    browser: object, board_server: dict[str, str]
) -> None:
    page = signed_in(browser, board_server)
    page.goto(board_server["url"] + "/board/endpoints/pypi-malware")  # type: ignore[attr-defined]
    page.get_by_label("Name").fill("scanner-7")  # type: ignore[attr-defined]
    page.get_by_role("button", name="Issue credential").click()  # type: ignore[attr-defined]
    secret = page.locator("pre.secret").inner_text()  # type: ignore[attr-defined]
    assert secret.startswith("mfw_")
    page.reload()  # type: ignore[attr-defined]
    assert secret not in page.content()  # type: ignore[attr-defined]
    assert page.get_by_role("heading", name="No new credential to show").is_visible()  # type: ignore[attr-defined]
    page.goto(board_server["url"] + "/board/endpoints/pypi-malware")  # type: ignore[attr-defined]
    credentials = page.get_by_role("region", name="Credentials")  # type: ignore[attr-defined]
    assert credentials.locator("tbody tr", has_text="scanner-7").count() == 1
    page.context.close()  # type: ignore[attr-defined]


def test_a_notice_in_the_url_shows_nothing(browser: object, board_server: dict[str, str]) -> None:
    page = signed_in(browser, board_server)
    for path in ("/board", "/board/endpoints/pypi-malware"):
        page.goto(board_server["url"] + path + "?notice=Account+locked,+call+555-0100")  # type: ignore[attr-defined]
        assert page.get_by_role("status").count() == 0  # type: ignore[attr-defined]
        assert "Account locked" not in page.locator("body").inner_text()  # type: ignore[attr-defined]
    page.context.close()  # type: ignore[attr-defined]


def test_the_focus_ring_stands_out_from_white(
    browser: object, board_server: dict[str, str]
) -> None:
    page = signed_in(browser, board_server)
    tab_to(page, re.compile(r"^Dead\s+\d+$"))  # the Dead pill, on the white of the page
    ring = page.evaluate(  # type: ignore[attr-defined]
        "(() => { const s = getComputedStyle(document.activeElement);"
        " return [s.outlineStyle, s.outlineWidth, s.outlineColor]; })()"
    )
    style, width, color = ring
    assert style == "solid" and float(width.removesuffix("px")) >= 2, ring
    rgb = tuple(int(n) for n in re.findall(r"\d+", color)[:3])
    assert contrast(rgb, (255, 255, 255)) >= 3.0, (color, contrast(rgb, (255, 255, 255)))
    page.context.close()  # type: ignore[attr-defined]


def test_a_dead_letter_redriven_with_the_keyboard_alone(
    browser: object, board_server: dict[str, str]
) -> None:
    page = signed_in(browser, board_server)
    page.goto(board_server["url"] + "/board?status=dead&q=keyboard")  # type: ignore[attr-defined]
    tab_to(page, re.compile(r"^keyboard-pkg$"))
    page.keyboard.press("Enter")  # type: ignore[attr-defined]
    page.wait_for_url(re.compile(r"/board/scans/\d+\?"))  # type: ignore[attr-defined]
    tab_to(page, re.compile(r"^Redrive #\d+"))
    page.keyboard.press("Enter")  # type: ignore[attr-defined]
    page.wait_for_url(re.compile(r"/board/scans/\d+/redrive"))  # type: ignore[attr-defined]
    assert "keyboard-pkg" in page.locator("h1").inner_text()  # type: ignore[attr-defined]
    tab_to(page, re.compile(r"^Redrive #\d+ keyboard-pkg"))
    page.keyboard.press("Enter")  # type: ignore[attr-defined]
    page.wait_for_url(re.compile(r"/board/scans/\d+\?"))  # type: ignore[attr-defined]
    assert "redriven" in page.get_by_role("status").inner_text()  # type: ignore[attr-defined]
    tab_to(page, re.compile(r"^\u2190 Back$"))
    page.keyboard.press("Enter")  # type: ignore[attr-defined]
    page.wait_for_url(re.compile(r"status=dead.*q=keyboard"))  # type: ignore[attr-defined]
    assert page.locator(".matched").inner_text() == "0"  # type: ignore[attr-defined]
    page.context.close()  # type: ignore[attr-defined]


def test_a_queue_paused_and_resumed_from_the_board_with_its_confirmation(
    browser: object, board_server: dict[str, str]
) -> None:
    url, endpoint = board_server["url"], "/board/endpoints/pypi-malware"
    page = signed_in(browser, board_server)
    page.goto(url + endpoint)  # type: ignore[attr-defined]
    page.get_by_role("textbox", name="Queue").fill("held")  # type: ignore[attr-defined]
    page.get_by_role("button", name="Pause a queue…").click()  # type: ignore[attr-defined]
    heading = page.get_by_role("heading", name="Pause queue held of endpoint pypi-malware?")  # type: ignore[attr-defined]
    heading.wait_for(state="visible", timeout=15_000)  # the confirmation page has loaded
    page.get_by_role("button", name="Pause queue held").click()  # type: ignore[attr-defined]
    page.wait_for_url(re.compile(r"/board/endpoints/pypi-malware$"))  # type: ignore[attr-defined]
    assert "Queue held paused" in page.get_by_role("status").inner_text()  # type: ignore[attr-defined]
    with httpx.Client(base_url=url, timeout=10) as api:
        body = {"name": "held-pkg", "version": "1", "queue": "held"}
        made = api.post("/api/v1/scans", json=body, headers=auth(board_server["source"]))
        assert made.status_code == 201
        # Other tests' scans may be queued on other queues: lease all that is due.
        polled = api.post("/api/v1/jobs?batch=100", headers=auth(board_server["worker"]))
        held = [job for job in polled.json() if job["queue"] == "held"]
        assert held == [], "a paused queue's scans are not leased"
        page.get_by_role("link", name="Resume queue held…").click()  # type: ignore[attr-defined]
        page.get_by_role("button", name="Resume queue held").click()  # type: ignore[attr-defined]
        page.wait_for_url(re.compile(r"/board/endpoints/pypi-malware$"))  # type: ignore[attr-defined]
        assert "Every queue is leased." in page.content()  # type: ignore[attr-defined]
        [job] = api.post("/api/v1/jobs", headers=auth(board_server["worker"])).json()
        assert job["name"] == "held-pkg"
    page.context.close()  # type: ignore[attr-defined]


def finish(server: dict[str, str], count: int) -> None:
    """`count` scans submitted in bulk and finished in batches, as a busy fleet would."""
    with httpx.Client(base_url=server["url"], timeout=30) as api:
        scans = [{"name": f"busy-{n}", "version": "1"} for n in range(count)]
        made = api.post(
            "/api/v1/scans/batch", json={"scans": scans}, headers=auth(server["source"])
        )
        assert made.status_code == 200
        while jobs := api.post("/api/v1/jobs?batch=100", headers=auth(server["worker"])).json():
            results = [{"scan_id": j["scan_id"], "outcome": "finished", "attempt": j["attempt"],
                        "assignment_id": j["assignment_id"]} for j in jobs]  # fmt: skip
            done = api.post(
                "/api/v1/jobs/results", json={"results": results}, headers=auth(server["worker"])
            )
            assert done.status_code == 200


def test_the_pictures_are_images_with_their_numbers_for_a_screen_reader(
    browser: object, board_server: dict[str, str], shots: Path
) -> None:
    finish(board_server, 600)  # beside two dead letters: 1 in 300 of the busiest bar
    page = signed_in(browser, board_server)
    day = re.compile(r"Scans per hour over the last 24 hours: 6\d\d finished")
    for _ in range(100):  # each server process adds its counts to the charts every 5 s
        page.goto(board_server["url"] + "/board")  # type: ignore[attr-defined]
        if page.get_by_role("img", name=day).count():  # type: ignore[attr-defined]
            break
        page.wait_for_timeout(200)  # type: ignore[attr-defined]
    for name in ("Scans per hour over the last 24 hours", "Scans per minute over the last hour"):
        chart = page.get_by_role("img", name=re.compile(name))  # type: ignore[attr-defined]
        assert chart.is_visible(), name
    # A scale from 0 to the busiest bar in its unit, and time ticks in UTC, both charts.
    plots = page.locator(".activity .plot")  # type: ignore[attr-defined]
    assert plots.count() == 2
    for index, unit in enumerate(("scans per hour", "scans per minute")):
        plot = plots.nth(index)
        assert int(plot.locator(".max").inner_text().replace(",", "")) >= 600
        assert plot.locator(".unit").inner_text() == unit and plot.locator(".zero").is_visible()
        assert plot.locator(".zone").inner_text() == "UTC"
        ticks = plot.locator("svg.chart text")
        assert ticks.count() >= 3 and ticks.first.is_visible()
        labels = ticks.all_text_contents()
        assert all(re.fullmatch(r"\d\d:\d\d", t) for t in labels), labels
    # The two dead letters beside 600 finished scans are a bar the eye still finds.
    dead_bars = page.locator("svg.chart rect.dead")  # type: ignore[attr-defined]
    assert dead_bars.count() >= 1
    for index in range(dead_bars.count()):
        box = dead_bars.nth(index).bounding_box()
        assert box is not None and box["height"] >= 1.9, box
    said = page.locator("svg.chart g title").all_text_contents()  # type: ignore[attr-defined]
    assert any(re.fullmatch(r"\d\d:\d\d UTC: \d+ finished, 0 failed, [12] dead-lettered", t)
               for t in said), said  # fmt: skip
    page.locator(".activity").screenshot(path=str(shots / "board-activity.png"))  # type: ignore[attr-defined]
    page.set_viewport_size(PHONE)  # type: ignore[attr-defined]
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")  # type: ignore[attr-defined]
    assert plots.first.locator("svg.chart text").first.is_visible()
    page.set_viewport_size(LAPTOP)  # type: ignore[attr-defined]
    page.get_by_text("The numbers").first.click()  # type: ignore[attr-defined]
    assert page.get_by_role("columnheader", name="Dead-lettered").first.is_visible()  # type: ignore[attr-defined]
    page.goto(board_server["url"] + "/board/causes")  # type: ignore[attr-defined]
    spark = page.get_by_role(
        "img", name=re.compile(r"dead letters per hour over the last 24 hours: \d+ in all")
    )  # type: ignore[attr-defined]
    assert spark.is_visible()
    link = page.get_by_role("link", name="OSError: sandbox died")  # type: ignore[attr-defined]
    link.focus()
    page.keyboard.press("Enter")  # type: ignore[attr-defined]
    page.wait_for_url(re.compile(r"status=dead&cause=[0-9a-f]{16}"))  # type: ignore[attr-defined]
    page.context.close()  # type: ignore[attr-defined]


def test_a_source_gone_quiet_is_marked_on_its_endpoints_page(
    tmp_path: Path, browser: object
) -> None:
    """A source that submitted, then fell silent past MAINFRAME_QUIET_SOURCE_SECONDS (two
    seconds here), is marked quiet under Sources with the time of its last submission; one
    that never submitted reads never and is not marked."""
    url = f"sqlite:///{tmp_path / 'mainframe.db'}"
    with ServerProcess(url, tmp_path, MAINFRAME_QUIET_SOURCE_SECONDS="2") as server:
        owner = server.stdout_path.read_text().strip().splitlines()[-1]
        cli(url, "endpoint", "create", "pypi", "--owner", "admin")
        feed = cli(url, "token", "create", "--endpoint", "pypi", "--source", "feed")
        cli(url, "token", "create", "--endpoint", "pypi", "--source", "cron")
        with httpx.Client(base_url=server.url, timeout=10) as api:
            body = {"name": "fed", "version": "1"}
            assert api.post("/api/v1/scans", json=body, headers=auth(feed)).status_code == 201
        page = signed_in(browser, {"url": server.url, "owner": owner})
        sources = page.get_by_role("region", name="Sources")  # type: ignore[attr-defined]
        row = sources.locator("tbody tr", has_text="feed")

        def marked_quiet() -> bool:
            page.goto(server.url + "/board/endpoints/pypi")  # type: ignore[attr-defined]
            return bool(row.locator(".status", has_text="quiet").count())

        # Written within a flush (5 s) of the submission, quiet two seconds after that.
        wait_for(marked_quiet, timeout=30, what="the source marked quiet", every=0.5)
        assert row.locator("td").nth(1).locator("time").count() == 1
        assert "silent for over 2s" in sources.inner_text()
        cron = sources.locator("tbody tr", has_text="cron")
        assert "never" in cron.inner_text() and cron.locator(".status").count() == 0
        page.context.close()  # type: ignore[attr-defined]
