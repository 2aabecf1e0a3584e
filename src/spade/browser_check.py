"""Load the environment pages (``spade.paper.env_cards``) in a real headless Chromium and check that they render.

    python -m spade.browser_check results/env_cards/toy/cards.html results/env_cards/toy/environments.html \
        --screenshot-dir results/env_cards/toy/screenshots

Chromium (the Debian package ``chromium``; ``SPADE_CHROMIUM`` names another binary) starts headless with a private
profile and a DevTools port of its own choosing; the check speaks the Chrome DevTools protocol over a websocket
(``websocket-client``). Per page it waits for the load event and then fails on:

* any console error, uncaught exception or browser log entry of level error (a blocked inline script or a failed
  load shows up here);
* a DOM that does not hold what the page says it holds: the cards page (``data-page="env-cards"``) needs one
  ``section.card`` per ``data-cards`` and a class name in every filled card; the browser page
  (``data-page="env-browser"``) needs one ``article.env`` per slot and rejected candidate (``data-environments`` +
  ``data-rejected``), and every article with code needs Pygments' highlighted tokens;
* more ``<script>`` elements than the page declares (``data-scripts``) or any element with an inline event-handler
  attribute (``on...``): generated text must never turn into markup.

A PNG screenshot of each page is saved (``<folder>_<page>.png``), and for the browser page one more with its first
code block opened (``..._code.png``), whose highlighted lines must have a height on the page. Exit status: 0 all pages pass, 1 a page fails (each problem is printed),
2 Chromium or a page is missing.

A page that is Snakemake's report (``snakemake --report results/report.html``, or the ``report.html`` of the unpacked
``--report results/report.zip``) is checked as one: the report is a script-built application, so the check drives it
as a reader would. It fails on any console error, on a report without results or without its workflow description,
and, opening each category's subcategories and each result in turn, on a result the listing does not show or whose
caption does not render; each picture, page and PDF is then opened in the report's viewer, where a picture must
decode. Screenshots: the front page (``<folder>_<page>.png``), the first subcategory's listing
(``..._listing.png``) and the first result with its caption (``..._caption.png``).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
START_TIMEOUT_S = 30.0
LOAD_TIMEOUT_S = 60.0
SETTLE_S = 0.5  # after the load event, for late console messages
VIEWPORT = (1280, 1600)

# evaluated in the page after load; returns plain data (see the module docstring for the rules)
_DOM_PROBE = """(() => {
  const body = document.body;
  const data = body ? body.dataset : {};
  const withHandlers = [...document.querySelectorAll('*')].filter(
      el => [...el.attributes].some(a => a.name.toLowerCase().startsWith('on'))).length;
  const articles = [...document.querySelectorAll('article.env')];
  const withCode = articles.filter(a => a.dataset.hasCode === '1');
  const highlighted = withCode.filter(a => a.querySelector('.highlight pre span') !== null).length;
  const cards = [...document.querySelectorAll('section.card')];
  const filled = cards.filter(c => !c.classList.contains('empty'));
  const named = filled.filter(c => (c.querySelector('.class-name') || {}).textContent).length;
  return {
    page: data.page || null, title: document.title,
    declared: {cards: Number(data.cards || 0), environments: Number(data.environments || 0),
               rejected: Number(data.rejected || 0), scripts: Number(data.scripts || 0)},
    scripts: document.scripts.length, handlers: withHandlers,
    cards: cards.length, filled_cards: filled.length, named_cards: named,
    articles: articles.length, with_code: withCode.length, highlighted: highlighted,
    toy_banner: document.querySelector('[data-scale="toy"]') !== null,
    height: document.documentElement.scrollHeight,
  };
})()"""


# opens the first code block of the page, scrolls it to the top and returns the height of its highlighted code
_OPEN_FIRST_CODE = """(() => {
  const article = [...document.querySelectorAll('article.env')].find(a => a.dataset.hasCode === '1');
  if (!article) { return null; }
  const details = article.querySelector('details.code');
  if (details) { details.open = true; }
  article.scrollIntoView();
  const pre = article.querySelector('.highlight pre');
  return pre ? pre.getBoundingClientRect().height : 0;
})()"""


# whether the loaded page is Snakemake's report (its application object and data)
_IS_SNAKEMAKE_REPORT = """(() => document.title === 'Snakemake Report' && typeof results === 'object'
    && typeof categories === 'object' && typeof app === 'object' && app !== null)()"""

# walks the report as a reader does: the front page, each category's subcategories, each result's description;
# returns what the DOM showed at each stop. Waits for React's render after each change of view.
_REPORT_WALK = """(async () => {
  const settle = async (ready) => {
    for (let i = 0; i < 100; i++) {
      await new Promise(r => setTimeout(r, 20));
      if (ready()) { return true; }
    }
    return false;
  };
  const text = html => { const div = document.createElement('div'); div.innerHTML = html || '';
                         return div.textContent.replace(/\\s+/g, ' ').trim(); };
  const nav = () => document.querySelector('nav');
  const out = {page: 'snakemake-report', results: Object.keys(results), categories: categories,
               description: text(workflow_desc), listed: {}, captions: {}, menu: ''};
  await settle(() => nav() && nav().innerText.trim().length > 0);
  out.description_shown = out.description.length > 0
      && document.body.innerText.replace(/\\s+/g, ' ').includes(out.description.slice(0, 60));
  app.setView({navbarMode: 'menu'});
  await settle(() => Object.keys(categories).every(c => nav().innerText.includes(c)));
  out.menu = nav().innerText;
  for (const category of Object.keys(categories)) {
    for (const subcategory of Object.keys(categories[category])) {
      const expected = categories[category][subcategory];
      const rows = () => [...nav().querySelectorAll('table tbody tr')].map(tr => tr.innerText.trim());
      // through the menu, as a reader goes: a listing keeps the rows it was first drawn with
      app.setView({navbarMode: 'menu'});
      await settle(() => rows().length === 0);
      app.setView({navbarMode: 'subcategory', category: category, subcategory: subcategory});
      await settle(() => expected.every(path => rows().some(row => row.includes(path))));
      out.listed[category + ' / ' + subcategory] = {expected: expected, rows: rows()};
    }
  }
  for (const path of Object.keys(results)) {
    app.showResultInfo(path);
    const shown = () => { const el = nav().querySelector('.prose'); return el ? el.innerText.replace(/\\s+/g, ' ').trim() : ''; };
    await settle(() => !results[path].caption || shown().length > 0);
    out.captions[path] = {expected: text(results[path].caption), shown: shown()};
  }
  // each picture, page and PDF opened in the viewer, as its eye button does; a picture must decode
  out.viewed = {};
  for (const [path, entry] of Object.entries(results)) {
    const mime = entry.mime_type || '';
    const kind = mime.startsWith('image/') ? 'img' : mime === 'text/html' ? 'html' : mime === 'application/pdf' ? 'pdf' : null;
    if (!kind) { continue; }
    app.setView({content: kind, contentPath: entry.data_uri, resultPath: path});
    const image = () => [...document.querySelectorAll('img')].find(img => img.getAttribute('src') === entry.data_uri);
    const frame = () => [...document.querySelectorAll('iframe')].find(f => f.getAttribute('src') === entry.data_uri);
    await settle(() => kind === 'img' ? (image() && image().complete) : Boolean(frame()));
    out.viewed[path] = {kind: kind, shown: Boolean(kind === 'img' ? image() : frame()),
                        width: kind === 'img' && image() ? image().naturalWidth : null};
  }
  return out;
})()"""


class BrowserMissing(RuntimeError):
    """No Chromium binary was found."""


def find_chromium() -> str | None:
    """The Chromium binary: ``SPADE_CHROMIUM`` if set, else the first of CHROMIUM_NAMES on PATH."""
    override = os.environ.get("SPADE_CHROMIUM")
    if override:
        return override if Path(override).is_file() or shutil.which(override) else None
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


@dataclass
class PageCheck:
    page: Path
    problems: list = field(default_factory=list)
    console: list = field(default_factory=list)  # every console message and log entry seen, "level: text"
    dom: dict = field(default_factory=dict)
    screenshot: Path | None = None

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict:
        return {"page": str(self.page), "ok": self.ok, "problems": self.problems, "console": self.console,
                "dom": self.dom, "screenshot": str(self.screenshot) if self.screenshot else None}


class DevTools:
    """A minimal Chrome DevTools protocol session over one page target's websocket."""

    def __init__(self, url: str, timeout: float):
        import websocket  # websocket-client

        self.ws = websocket.create_connection(url, timeout=timeout, suppress_origin=True)
        self.next_id = 0
        self.events: list = []

    def call(self, method: str, params: dict | None = None, timeout: float = 30.0) -> dict:
        self.next_id += 1
        wanted = self.next_id
        self.ws.send(json.dumps({"id": wanted, "method": method, "params": params or {}}))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = self._receive(deadline)
            if message is None:
                break
            if message.get("id") == wanted:
                if "error" in message:
                    raise RuntimeError(f"DevTools {method} failed: {message['error']}")
                return message.get("result", {})
            self.events.append(message)
        raise TimeoutError(f"DevTools {method}: no answer within {timeout:.0f} s")

    def _receive(self, deadline: float) -> dict | None:
        import websocket

        self.ws.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            return json.loads(self.ws.recv())
        except websocket.WebSocketTimeoutException:
            return None

    def wait_for(self, method: str, timeout: float) -> bool:
        """Whether event ``method`` arrived (already or within ``timeout``)."""
        if any(e.get("method") == method for e in self.events):
            return True
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = self._receive(deadline)
            if message is None:
                continue
            self.events.append(message)
            if message.get("method") == method:
                return True
        return False

    def drain(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            message = self._receive(deadline)
            if message is not None:
                self.events.append(message)

    def close(self) -> None:
        self.ws.close()


class Chromium:
    """A headless Chromium with a private profile; use as a context manager."""

    def __init__(self, binary: str | None = None):
        self.binary = binary or find_chromium()
        if self.binary is None:
            raise BrowserMissing("no Chromium found (looked for SPADE_CHROMIUM, then "
                                 f"{', '.join(CHROMIUM_NAMES)} on PATH); on Debian/Ubuntu: apt-get install chromium")
        self.profile = None
        self.process = None
        self.port = None

    def __enter__(self):
        self.profile = tempfile.mkdtemp(prefix="spade-chromium-")
        args = [self.binary, "--headless", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
                "--disable-extensions", "--disable-background-networking", "--disable-sync", "--mute-audio",
                "--hide-scrollbars", "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
                f"--user-data-dir={self.profile}", f"--window-size={VIEWPORT[0]},{VIEWPORT[1]}"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            args.append("--no-sandbox")  # Chromium refuses to start as root with its own sandbox
        args.append("about:blank")
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                error = self.process.stderr.read().decode("utf-8", "replace")[-2000:]
                self._cleanup()
                raise RuntimeError(f"{self.binary} exited with status {self.process.returncode} at start: {error}")
            if port_file.is_file():
                text = port_file.read_text().split()
                if text:
                    self.port = int(text[0])
                    return self
            time.sleep(0.1)
        self._cleanup()
        raise RuntimeError(f"{self.binary} did not open its DevTools port within {START_TIMEOUT_S:.0f} s")

    def page_socket(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/list", timeout=10) as answer:
            targets = json.loads(answer.read().decode("utf-8"))
        pages = [t for t in targets if t.get("type") == "page" and t.get("webSocketDebuggerUrl")]
        if not pages:
            raise RuntimeError(f"Chromium on port {self.port} lists no page target: {targets}")
        return pages[0]["webSocketDebuggerUrl"]

    def _cleanup(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process is not None and self.process.stderr is not None:
            self.process.stderr.close()
        if self.profile is not None:
            shutil.rmtree(self.profile, ignore_errors=True)

    def __exit__(self, *exc):
        self._cleanup()


def _console_entries(events: list) -> tuple[list, list]:
    """(every message as "level: text", the errors among them) from the DevTools events."""
    seen, errors = [], []
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            entry = f"console.{params.get('type')}: {text}"
            seen.append(entry)
            if params.get("type") in ("error", "assert"):
                errors.append(entry)
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            text = details.get("exception", {}).get("description") or details.get("text", "")
            entry = f"uncaught exception: {text}"
            seen.append(entry)
            errors.append(entry)
        elif method == "Log.entryAdded":
            item = params.get("entry", {})
            entry = f"log.{item.get('level')} ({item.get('source')}): {item.get('text', '')}"
            seen.append(entry)
            if item.get("level") == "error":
                errors.append(entry)
    return seen, errors


def dom_problems(dom: dict) -> list:
    """What the page's DOM lacks, by the rules of the module docstring."""
    problems = []
    declared = dom.get("declared", {})
    if dom.get("scripts") != declared.get("scripts"):
        problems.append(f"{dom.get('scripts')} <script> elements, the page declares {declared.get('scripts')}")
    if dom.get("handlers"):
        problems.append(f"{dom['handlers']} elements carry inline event-handler attributes")
    page = dom.get("page")
    if page == "env-cards":
        if dom.get("cards") != declared.get("cards") or not dom.get("cards"):
            problems.append(f"{dom.get('cards')} cards rendered, the page declares {declared.get('cards')}")
        if dom.get("named_cards") != dom.get("filled_cards"):
            problems.append(f"only {dom.get('named_cards')} of {dom.get('filled_cards')} filled cards show a class name")
    elif page == "env-browser":
        expected = declared.get("environments", 0) + declared.get("rejected", 0)
        if dom.get("articles") != expected or not expected:
            problems.append(f"{dom.get('articles')} environments rendered, the page declares {expected}")
        if dom.get("highlighted") != dom.get("with_code"):
            problems.append(f"only {dom.get('highlighted')} of {dom.get('with_code')} code blocks are highlighted")
    else:
        problems.append(f"not an environment page (body data-page is {page!r})")
    return problems


def report_problems(dom: dict) -> list:
    """What a Snakemake report's walk (:data:`_REPORT_WALK`) found missing: results, the workflow description, a
    result that its subcategory does not list, a caption that is empty or not shown."""
    problems = []
    paths = dom.get("results") or []
    if not paths:
        problems.append("the report holds no result")
    if not dom.get("description"):
        problems.append("the report has no workflow description")
    elif not dom.get("description_shown"):
        problems.append("the workflow description is not shown on the front page")
    in_categories = set()
    for category, subcategories in (dom.get("categories") or {}).items():
        if category not in (dom.get("menu") or ""):
            problems.append(f"the menu does not show category {category!r}")
        for subcategory, expected in subcategories.items():
            in_categories.update(expected)
            rows = (dom.get("listed") or {}).get(f"{category} / {subcategory}", {}).get("rows", [])
            for path in expected:
                if not any(path in row for row in rows):
                    problems.append(f"{category} / {subcategory} does not list {path}")
    for path in paths:
        if path not in in_categories:
            problems.append(f"{path} is in no category")
        caption = (dom.get("captions") or {}).get(path, {})
        if not caption.get("expected"):
            problems.append(f"{path} has no caption")
        elif caption.get("expected")[:60] not in caption.get("shown", ""):
            problems.append(f"the caption of {path} is not shown with it")
    for path, view in (dom.get("viewed") or {}).items():
        if not view.get("shown"):
            problems.append(f"{path} does not open in the report's viewer")
        elif view.get("kind") == "img" and not view.get("width"):
            problems.append(f"{path} opens in the viewer but does not display (the image does not decode)")
    return problems


def _screenshot(tools: DevTools, path: Path) -> None:
    shot = tools.call("Page.captureScreenshot", {"format": "png"})
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(base64.b64decode(shot["data"]))
    os.replace(tmp, path)


def check_page(browser: Chromium, page: Path, screenshot: Path | None) -> PageCheck:
    """Load ``page`` in a fresh tab state, check it, save ``screenshot`` (PNG) when given."""
    result = PageCheck(page)
    tools = DevTools(browser.page_socket(), LOAD_TIMEOUT_S)
    try:
        for domain in ("Page", "Runtime", "Log"):
            tools.call(f"{domain}.enable")
        tools.call("Emulation.setDeviceMetricsOverride",
                   {"width": VIEWPORT[0], "height": VIEWPORT[1], "deviceScaleFactor": 1, "mobile": False})
        tools.events.clear()
        tools.call("Page.navigate", {"url": page.resolve().as_uri()})
        if not tools.wait_for("Page.loadEventFired", LOAD_TIMEOUT_S):
            result.problems.append(f"no load event within {LOAD_TIMEOUT_S:.0f} s")
        tools.drain(SETTLE_S)
        answer = tools.call("Runtime.evaluate", {"expression": _IS_SNAKEMAKE_REPORT, "returnByValue": True})
        if answer.get("result", {}).get("value") is True:
            _check_report(tools, result, screenshot)
            return result
        answer = tools.call("Runtime.evaluate", {"expression": _DOM_PROBE, "returnByValue": True})
        if "exceptionDetails" in answer:
            result.problems.append(f"the DOM probe failed: {answer['exceptionDetails'].get('text')}")
        else:
            result.dom = answer.get("result", {}).get("value") or {}
            result.problems += dom_problems(result.dom)
        if screenshot is not None:
            _screenshot(tools, screenshot)
            result.screenshot = screenshot
        # the first code block, opened: its highlighted lines must take up room on the page
        answer = tools.call("Runtime.evaluate", {"expression": _OPEN_FIRST_CODE, "returnByValue": True})
        height = answer.get("result", {}).get("value")
        result.dom["first_code_height"] = height
        if result.dom.get("with_code") and not (isinstance(height, (int, float)) and height > 0):
            result.problems.append("the first code block, opened, has no height: its code does not render")
        if screenshot is not None and result.dom.get("with_code"):
            _screenshot(tools, screenshot.with_name(f"{screenshot.stem}_code.png"))
        tools.drain(0.1)
        result.console, errors = _console_entries(tools.events)
        result.problems += [f"console: {entry}" for entry in errors]
        tools.call("Page.navigate", {"url": "about:blank"})
    finally:
        tools.close()
    return result


def _check_report(tools: DevTools, result: PageCheck, screenshot: Path | None) -> None:
    """The checks of a Snakemake report (module docstring), into ``result``; leaves the tab on about:blank."""
    if screenshot is not None:
        _screenshot(tools, screenshot)
        result.screenshot = screenshot
    answer = tools.call("Runtime.evaluate", {"expression": _REPORT_WALK, "returnByValue": True, "awaitPromise": True},
                        timeout=LOAD_TIMEOUT_S)
    if "exceptionDetails" in answer:
        details = answer["exceptionDetails"]
        result.problems.append(f"walking the report failed: {details.get('exception', {}).get('description') or details.get('text')}")
    else:
        result.dom = answer.get("result", {}).get("value") or {}
        result.problems += report_problems(result.dom)
    if screenshot is not None and result.dom.get("categories"):
        category, subcategories = next(iter(result.dom["categories"].items()))
        subcategory, paths = next(iter(subcategories.items()))
        for view, name in (({"navbarMode": "subcategory", "category": category, "subcategory": subcategory},
                            "listing"), ({"navbarMode": "resultinfo", "resultPath": paths[0]}, "caption")):
            tools.call("Runtime.evaluate", {"expression": f"app.setView({json.dumps(view)})"})
            tools.drain(0.3)
            _screenshot(tools, screenshot.with_name(f"{screenshot.stem}_{name}.png"))
    tools.drain(0.1)
    result.console, errors = _console_entries(tools.events)
    result.problems += [f"console: {entry}" for entry in errors]
    tools.call("Page.navigate", {"url": "about:blank"})


def check_pages(pages: list, screenshot_dir: Path | None = None, binary: str | None = None) -> list:
    """Check every page in one browser; returns [PageCheck]. BrowserMissing / FileNotFoundError on bad input."""
    pages = [Path(p) for p in pages]
    missing = [str(p) for p in pages if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"no such page: {', '.join(missing)}")
    with Chromium(binary) as browser:
        return [check_page(browser, page, (screenshot_dir / f"{page.parent.name}_{page.stem}.png") if screenshot_dir else None)
                for page in pages]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spade.browser_check", description=__doc__.splitlines()[0])
    parser.add_argument("pages", nargs="+", type=Path,
                        help="HTML pages written by spade.paper.env_cards, or Snakemake's report (snakemake --report)")
    parser.add_argument("--screenshot-dir", type=Path, default=None,
                        help="save <page stem>.png here (default: beside the first page, in screenshots/)")
    parser.add_argument("--json", type=Path, default=None, help="also write the verdicts as JSON here")
    args = parser.parse_args(argv)
    shots = args.screenshot_dir or args.pages[0].parent / "screenshots"
    try:
        results = check_pages(args.pages, shots)
    except (BrowserMissing, FileNotFoundError) as exc:
        print(f"browser_check: error: {exc}", file=sys.stderr)
        return 2
    for result in results:
        verdict = "ok" if result.ok else "FAILED"
        print(f"{result.page}: {verdict}; screenshot {result.screenshot}")
        for problem in result.problems:
            print(f"  - {problem}")
    if args.json:
        from spade.io import atomic_write_json

        atomic_write_json(args.json, [r.to_dict() for r in results])
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
