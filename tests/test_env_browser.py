"""The environment pages in a real headless Chromium (spade.browser_check over the DevTools protocol): the pages of a
run with hostile generated text load without console errors, show every card and highlighted code, run no injected
script, and are screenshotted; broken pages fail the check. Skipped where Chromium is not installed."""

from __future__ import annotations

import shutil

import pytest

from spade import browser_check

from spade.paper import env_cards_pages
from test_env_cards import build_run, render

pytestmark = pytest.mark.skipif(
    browser_check.find_chromium() is None,
    reason="Chromium is not installed: `apt-get install chromium` as root (or SPADE_BROWSER=1 ./setup.sh), or point "
           "SPADE_CHROMIUM at a Chromium binary")


@pytest.fixture(scope="module")
def pages(pool, tmp_path_factory):
    base = tmp_path_factory.mktemp("env_browser")
    done = render(build_run(pool, base / "runs" / "tiny_cards"), base / "out", pool, max_turns=3)
    return done["cards_html"], done["browser_html"], base


def test_pages_render_in_headless_chromium(pages):
    cards, browser, base = pages
    shots = base / "shots"
    results = browser_check.check_pages([cards, browser], shots)
    for result in results:
        assert result.ok, (result.page, result.problems, result.console)
    card_check, browser_result = results
    assert card_check.dom["page"] == "env-cards" and card_check.dom["cards"] == 3
    assert card_check.dom["named_cards"] == 3 and card_check.dom["toy_banner"] is True
    # 5 slots + 1 rejected candidate; the 4 valid slots have code, all of it highlighted and laid out on the page
    assert browser_result.dom["articles"] == 6 and browser_result.dom["with_code"] == 4
    assert browser_result.dom["highlighted"] == 4 and browser_result.dom["first_code_height"] > 100
    assert browser_result.dom["scripts"] == 1 and browser_result.dom["handlers"] == 0
    assert not [line for line in card_check.console + browser_result.console if "error" in line.lower()]
    for name in ("pages_cards.png", "pages_environments.png", "pages_environments_code.png"):
        data = (shots / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000, name


def test_broken_pages_fail_the_check(pages, tmp_path):
    """A page whose escaping failed (generated text became a script and an event handler), a page whose own script
    throws, and a page whose code lost its highlighting: each check fails, naming why."""
    _, browser, _ = pages
    text = browser.read_text()
    injected = tmp_path / "injected" / "environments.html"
    injected.parent.mkdir()
    injected.write_text(text.replace("&lt;script&gt;window.__injected = 1;&lt;/script&gt;",
                                     "<script>window.__injected = 1;</script>", 1)
                        .replace("&lt;img src=x onerror=&quot;window.__injected = 2&quot;&gt;",
                                 '<img src=x onerror="window.__injected = 2">', 1))
    throwing = tmp_path / "throwing" / "environments.html"
    throwing.parent.mkdir()
    # the page's own script throws; its hash in the policy is updated so that it runs
    own = env_cards_pages._FILTER_SCRIPT
    script = own.replace('document.getElementById("filter")', 'document.getElementById("x").y')
    throwing.write_text(text.replace(own, script)
                        .replace(env_cards_pages._script_hash(own), env_cards_pages._script_hash(script)))
    plain = tmp_path / "plain" / "environments.html"
    plain.parent.mkdir()
    plain.write_text(text.replace('<div class="highlight">', '<div class="plain">'))
    results = {r.page.parent.name: r for r in browser_check.check_pages([injected, throwing, plain], tmp_path)}
    problems = {name: " | ".join(result.problems) for name, result in results.items()}
    assert "2 <script> elements, the page declares 1" in problems["injected"]
    assert "elements carry inline event-handler attributes" in problems["injected"]
    # the injected script is refused by the page's Content-Security-Policy, which the console reports
    assert "console:" in problems["injected"] and "Content Security Policy" in problems["injected"]
    assert "console: uncaught exception: TypeError" in problems["throwing"]
    assert "only 0 of 4 code blocks are highlighted" in problems["plain"]


def test_missing_chromium_and_missing_page_are_clear(tmp_path, monkeypatch, pages):
    monkeypatch.setenv("SPADE_CHROMIUM", str(tmp_path / "no-such-chromium"))
    assert browser_check.find_chromium() is None
    with pytest.raises(browser_check.BrowserMissing, match="apt-get install chromium"):
        browser_check.check_pages([pages[0]])
    monkeypatch.delenv("SPADE_CHROMIUM")
    assert browser_check.main([str(tmp_path / "absent.html")]) == 2
    assert shutil.which(browser_check.find_chromium())
