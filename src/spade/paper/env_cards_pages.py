"""The two HTML pages of a run: ``cards.html`` (the environment cards) and ``environments.html`` (every slot of
every set and every rejected candidate, with code highlighted by Pygments, validation reports and window statistics).

Both are self-contained: inline CSS, at most one small inline script (the browser's filter) whose hash the page's
Content-Security-Policy names, nothing else allowed, no network. Generated code, observations, hints and reports are
untrusted text: every one is HTML-escaped (``tests/test_env_cards.py`` checks this with a hostile environment).
"""

from __future__ import annotations

import base64
import hashlib
import html
import json

from spade.paper.env_cards_archive import EnvRecord, Rejection, RunArchive
from spade.paper.env_cards_content import (NOT_RECORDED, attempt_stage, card_fields, code_stats, corpus_text,
                                           empty_phase_text, finite_number, observation_text, scale_note, scale_word_of,
                                           set_diagnosis, stage_text, steps_label, window_stats)

HIGHLIGHT_STYLE = "friendly"


_CSS = """
:root { --ink: #1f2328; --muted: #59636e; --line: #d0d7de; --bg: #f6f8fa; --warn: #b2182b; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink); margin: 0; }
header.top { padding: 12px 20px; border-bottom: 1px solid var(--line); background: var(--bg); }
header.top h1 { font-size: 20px; margin: 0 0 4px 0; }
main { padding: 12px 20px 40px 20px; }
.scale { margin: 6px 0; padding: 6px 10px; border-radius: 4px; border: 1px solid var(--line); }
.scale.toy { border-color: var(--warn); color: var(--warn); font-weight: 600; background: #fff5f5; }
.badge { display: inline-block; padding: 1px 7px; border-radius: 10px; font-size: 12px; font-weight: 600;
         background: var(--bg); border: 1px solid var(--line); margin-right: 4px; }
.badge.toy { color: #fff; background: var(--warn); border-color: var(--warn); }
.badge.valid { color: #1a7f37; border-color: #1a7f37; }
.badge.empty, .badge.rejected { color: var(--warn); border-color: var(--warn); }
.cards { display: grid; grid-template-columns: repeat(3, minmax(0, 1fr)); gap: 14px; }
.card { border: 1px solid var(--line); border-radius: 8px; padding: 10px 12px; background: #fff; min-width: 0; }
.card h2 { font-size: 13px; text-transform: uppercase; color: var(--muted); margin: 0 0 4px 0; }
.card .class-name, article.env .class-name { font-family: ui-monospace, monospace; font-size: 17px; margin: 0 0 6px 0; }
dl.fields { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: 3px 10px; margin: 0; }
dl.fields dt { font-weight: 600; color: var(--muted); }
dl.fields dd { margin: 0; overflow-wrap: anywhere; }
pre.text { white-space: pre-wrap; overflow-wrap: anywhere; margin: 0; background: var(--bg); padding: 4px 6px;
           border-radius: 4px; font-size: 12px; max-height: 22em; overflow: auto; }
article.env { border: 1px solid var(--line); border-radius: 8px; padding: 10px 12px; margin: 10px 0; }
article.env.rejected, article.env.empty { border-left: 4px solid var(--warn); }
article.env.valid { border-left: 4px solid #1a7f37; }
table.data { border-collapse: collapse; font-size: 13px; margin: 6px 0; }
table.data th, table.data td { border: 1px solid var(--line); padding: 2px 6px; text-align: left; vertical-align: top; }
table.data td.msg { max-width: 60em; white-space: pre-wrap; overflow-wrap: anywhere; font-family: ui-monospace, monospace;
                    font-size: 12px; }
details > summary { cursor: pointer; color: var(--muted); margin: 4px 0; }
.highlight pre { margin: 0; font-size: 12px; line-height: 1.35; }
.codebox { overflow: auto; max-height: 40em; border: 1px solid var(--line); border-radius: 4px; }
td.linenos { background: var(--bg); color: var(--muted); user-select: none; }
.controls { position: sticky; top: 0; background: #fff; padding: 6px 0; border-bottom: 1px solid var(--line); z-index: 2; }
.controls input { width: 28em; max-width: 60vw; }
.muted { color: var(--muted); }
nav.sets a { margin-right: 8px; }
"""


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _highlight_css() -> str:
    from pygments.formatters import HtmlFormatter

    return HtmlFormatter(style=HIGHLIGHT_STYLE).get_style_defs(".highlight")


def highlight_python(code: str) -> str:
    """Pygments' HTML of ``code`` (every character of the source is escaped by the formatter)."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    return highlight(code, PythonLexer(), HtmlFormatter(style=HIGHLIGHT_STYLE, linenos="table"))


def _script_hash(script: str) -> str:
    return base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")


def _page(title: str, body_attrs: dict, body: str, script: str = "") -> str:
    script_src = f"'sha256-{_script_hash(script)}'" if script else "'none'"
    policy = f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src {script_src}"
    attrs = "".join(f' {key}="{_e(value)}"' for key, value in body_attrs.items())
    return (f"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"{policy}\">\n"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{_e(title)}</title>\n"
            f"<style>{_CSS}\n{_highlight_css()}</style>\n</head>\n<body{attrs} data-scripts=\"{1 if script else 0}\">\n"
            f"{body}\n" + (f"<script>{script}</script>\n" if script else "") + "</body>\n</html>\n")


def _header(archive: RunArchive, title: str, links: str) -> str:
    toy, note = scale_note(archive)
    badge = (f'<span class="badge toy">{_e(scale_word_of(archive))}</span>' if toy
             else '<span class="badge">paper scale</span>')
    scale = (f"{_e(archive.model_card or 'model unknown')}, "
             f"{_e(archive.total_steps if archive.total_steps is not None else 'unknown')} steps")
    return (f'<header class="top"><h1>{_e(title)}</h1><div>{badge}<span class="muted">run <strong>{_e(archive.run)}</strong> '
            f'({scale}); read from {_e(archive.run_dir.as_posix())}</span> {links}</div>'
            f'<div class="scale{" toy" if toy else ""}" data-scale="{"toy" if toy else "paper"}">{_e(note)}</div></header>')


def _fields_html(fields: list) -> str:
    rows = []
    for label, value in fields:
        multiline = label in ("first observation", "hint") or "\n" in value
        shown = f'<pre class="text">{_e(value)}</pre>' if multiline else _e(value)
        rows.append(f'<dt>{_e(label)}</dt><dd data-field="{_e(label)}">{shown}</dd>')
    return f'<dl class="fields">{"".join(rows)}</dl>'


def render_cards_html(archive: RunArchive, cards: list, observations: dict, browser_href: str,
                      figure_href: str | None) -> str:
    """The cards page: one card per third of training, linking each environment to the browser page."""
    sections = []
    for phase, lo, hi, env in cards:
        steps = steps_label(lo, hi)
        if env is None:
            sections.append(f'<section class="card empty" data-card="{phase}"><h2>{_e(phase)} ({_e(steps)})</h2>'
                            f'<p class="muted">{_e(empty_phase_text(lo, hi))}</p></section>')
            continue
        fields = card_fields(env, observations.get(env.anchor))
        sections.append(
            f'<section class="card" data-card="{phase}" data-env="{_e(env.env_id)}"><h2>{_e(phase)} ({_e(steps)})</h2>'
            f'<h3 class="class-name">{_e(env.data.get("class_name") or "(no class)")}</h3>{_fields_html(fields)}'
            f'<p><a href="{_e(browser_href)}#{_e(env.anchor)}">code, validation and per-step statistics</a></p>'
            "</section>")
    links = f'<a href="{_e(browser_href)}">every environment of the run</a>'
    if figure_href:
        links += f' · <a href="{_e(figure_href)}">the figure (PNG)</a>'
    intro = ("<p class=\"muted\">One environment per third of the run's training steps: the valid environment of "
             "that third with the highest designer reward (designer-written environments first). Lines of code and "
             "state variables are counted statically from the archived code; the first observation is replayed in "
             "the sandbox from the first recorded episode seed, because run archives do not keep it. "
             "\"not recorded\" marks what the run did not write down.</p>")
    body = (_header(archive, f"Environment cards: {archive.run}", links) + f"<main>{intro}"
            f'<div class="cards">{"".join(sections)}</div></main>')
    return _page(f"Environment cards: {archive.run}", {"data-page": "env-cards", "data-cards": str(len(cards))}, body)


def _report_rows(reports: list) -> str:
    rows = []
    for number, report in enumerate(reports, start=1):
        if not isinstance(report, dict):
            continue
        checks = ", ".join(map(str, report.get("checks") or [])) or "-"
        changes = ", ".join(map(str, report.get("changes") or [])) or "-"
        rows.append(f"<tr><td>{number}</td><td>{_e(report.get('revision', 0))}</td>"
                    f"<td>{'valid' if report.get('valid') else 'rejected'}</td><td>{_e(stage_text(report))}</td>"
                    f"<td><code>{_e(report.get('reason', '?'))}</code></td><td class=\"msg\">{_e(report.get('message', ''))}"
                    f"</td><td>{_e(checks)}</td><td>{_e(changes)}</td><td>{_e(report.get('isolation', ''))}</td>"
                    f"<td>{_e(report.get('generated_tokens', ''))}</td></tr>")
    if not rows:
        return '<p class="muted">No validation report was archived for this slot.</p>'
    return ('<table class="data reports"><tr><th>attempt</th><th>revision</th><th>verdict</th><th>failing stage</th>'
            '<th>reason code</th>'
            "<th>message</th><th>checks passed</th><th>intake changes</th><th>isolation</th><th>tokens</th></tr>"
            + "".join(rows) + "</table>")


def _window_rows(archive: RunArchive, env: EnvRecord) -> str:
    end = env.window_end
    steps = [step for step in sorted(archive.metrics) if step >= env.step and (end is None or step < end)]
    cells = []
    for step in steps:
        rates = archive.metrics[step].get("env_win_rates")
        value = rates.get(env.env_id) if isinstance(rates, dict) else None
        shown = f"{value:.2f}" if finite_number(value) is not None else "-"
        cells.append(f"<tr><td>{step}</td><td>{shown}</td></tr>")
    if not cells:
        return '<p class="muted">No per-step record of this window in metrics.jsonl.</p>'
    return ('<table class="data per-step"><tr><th>step</th><th>win rate, no hint</th></tr>' + "".join(cells)
            + "</table>")


def _stats_table(rows: list) -> str:
    return ('<table class="data stats">' + "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows)
            + "</table>")


def _code_block(code: str, label: str, open_: bool = False) -> str:
    return (f'<details class="code"{" open" if open_ else ""}><summary>{_e(label)}</summary>'
            f'<div class="codebox">{highlight_python(code)}</div></details>')


def _env_article(archive: RunArchive, env: EnvRecord, observations: dict, rejected_here: list) -> str:
    data = env.data
    status = "valid" if env.valid else "empty"
    code = data.get("code") or ""
    lines, variables = code_stats(env)
    observation = observations.get(env.anchor) if env.valid else None
    fields = [
        ("environment id", env.env_id),
        ("skill", str(data.get("skill") or NOT_RECORDED)),
        ("source", env.source),
        ("kind", str(data.get("kind") or "-")),
        ("design attempts", str(data.get("attempts", "-"))),
        ("lines of code", lines),
        ("state variables", variables),
        ("corpus document", corpus_text(env)),
        ("constructor arguments", json.dumps(data.get("env_kwargs") or {}, sort_keys=True)),
        ("first observation", observation_text(observation) if env.valid else "no valid environment in this slot"),
        ("hint", str(data.get("hint") or "none written")),
    ]
    kept = "".join(f'<li><a href="#{_e(r.anchor)}">attempt {r.attempt}: {_e(r.report.get("reason", "?"))}</a></li>'
                   for r in rejected_here)
    kept_html = f"<p>Rejected candidates kept for this slot:</p><ul>{kept}</ul>" if kept else ""
    title = data.get("class_name") or "(no valid environment)"
    return (f'<article class="env {status}" id="{_e(env.anchor)}" data-status="{status}" '
            f'data-has-code="{1 if code else 0}" data-env="{_e(env.env_id)}">'
            f'<h3 class="class-name">{_e(title)} <span class="badge {status}">{status}</span></h3>'
            f"{_fields_html(fields)}<h4>Window statistics</h4>{_stats_table(window_stats(env))}"
            f"<details><summary>per-step win rate (metrics.jsonl)</summary>{_window_rows(archive, env)}</details>"
            f"<h4>Validation reports</h4>{_report_rows(data.get('reports') or [])}{kept_html}"
            + (_code_block(code, f"code ({lines} lines of code)") if code else "") + "</article>")


def _rejected_article(rejection: Rejection) -> str:
    report = rejection.report
    where = (f'slot <a href="#{_e(rejection.slot.anchor)}">{_e(rejection.slot.env_id)}</a> (set of step '
             f"{rejection.slot.step}), attempt {rejection.attempt}" if rejection.slot else
             "slot and step " + NOT_RECORDED + " (no archived slot has this report)")
    rows = [("failing stage", stage_text(report)), ("reason code", str(report.get("reason", "?"))),
            ("message", str(report.get("message", ""))),
            ("checks passed", ", ".join(map(str, report.get("checks") or [])) or "-"),
            ("intake changes", ", ".join(map(str, report.get("changes") or [])) or "-"),
            ("isolation", str(report.get("isolation", "-"))), ("kept in", rejection.folder.as_posix())]
    if rejection.slot is not None:
        rows.insert(0, ("skill", str(rejection.slot.data.get("skill") or NOT_RECORDED)))
    code = (_code_block(rejection.code, "sanitised code (code.py)", open_=True) if rejection.code else
            '<p class="muted">No sanitised code was kept (intake found no code to validate).</p>')
    return (f'<article class="env rejected" id="{_e(rejection.anchor)}" data-status="rejected" '
            f'data-has-code="{1 if rejection.code else 0}">'
            f'<h3 class="class-name">{_e(report.get("class_name") or "(no class found)")} '
            f'<span class="badge rejected">rejected at {_e(attempt_stage(report))}: {_e(report.get("reason", "?"))}'
            "</span></h3>"
            f"<p>{where}</p>{_stats_table(rows)}{code}"
            f'<details><summary>raw designer output (raw.txt)</summary><pre class="text">{_e(rejection.raw)}</pre>'
            "</details></article>")


_FILTER_SCRIPT = """(function () {
  var box = document.getElementById("filter"), status = document.getElementById("status");
  var shown = document.getElementById("shown");
  function apply() {
    var q = box.value.toLowerCase(), s = status.value, n = 0;
    document.querySelectorAll("article.env").forEach(function (a) {
      var ok = (!s || a.dataset.status === s) && (!q || a.textContent.toLowerCase().indexOf(q) >= 0);
      a.hidden = !ok;
      if (ok) { n += 1; }
    });
    shown.textContent = String(n);
  }
  box.addEventListener("input", apply);
  status.addEventListener("change", apply);
  apply();
}());"""


def render_browser_html(archive: RunArchive, observations: dict, cards_href: str) -> str:
    """The browser page: every slot of every set, then every rejected candidate."""
    by_slot: dict = {}
    for rejection in archive.rejected:
        if rejection.slot is not None:
            by_slot.setdefault(rejection.slot.anchor, []).append(rejection)
    overview, blocks = [], []
    for step, path, envs in archive.sets:
        valid = sum(env.valid for env in envs)
        rates = [env.data["wins"] / env.data["episodes"] for env in envs
                 if isinstance(env.data.get("episodes"), int) and env.data["episodes"] > 0
                 and isinstance(env.data.get("wins"), int)]
        mean = f"{sum(rates) / len(rates):.2f}" if rates else "-"
        designed = sum(env.designer_written for env in envs)
        stages, causes = set_diagnosis(envs)
        overview.append(f'<tr><td><a href="#set-{step:05d}">{step}</a></td><td>{valid}/{len(envs)}</td>'
                        f"<td>{designed}</td><td>{mean}</td><td>{_e(stages)}</td><td>{_e(causes)}</td>"
                        f"<td>{_e(path.name)}</td></tr>")
        articles = "".join(_env_article(archive, env, observations, by_slot.get(env.anchor, [])) for env in envs)
        blocks.append(f'<section class="set" id="set-{step:05d}"><h2>Environment set of step {step}</h2>'
                      f'<p class="muted">{valid} of {len(envs)} slots valid; {designed} designer-written; '
                      f"archive {_e(path.name)}</p>{articles}</section>")
    rejected = "".join(_rejected_article(r) for r in archive.rejected)
    rejected_block = (f'<section id="rejected"><h2>Rejected candidates ({len(archive.rejected)})</h2>'
                      + (rejected or '<p class="muted">The run kept no rejected candidate (rejected/ is empty or '
                                     "absent).</p>") + "</section>")
    slots = len(archive.envs)
    controls = ('<div class="controls"><label>filter <input id="filter" type="search" '
                'placeholder="class name, skill, reason code, failing stage, text in the code"></label> '
                '<label>status <select id="status"><option value="">all</option><option value="valid">valid</option>'
                '<option value="empty">empty slot</option><option value="rejected">rejected</option></select></label> '
                f'<span class="muted"><span id="shown">{slots + len(archive.rejected)}</span> shown</span></div>')
    table = ('<table class="data overview"><tr><th>set step</th><th>valid / slots</th><th>designer-written</th>'
             "<th>mean win rate (no hint)</th><th>rejected attempts by failing stage</th>"
             "<th>no-hint plays by cause (window)</th><th>archive</th></tr>" + "".join(overview) + "</table>")
    links = f'<a href="{_e(cards_href)}">environment cards</a> · <a href="#rejected">rejected candidates</a>'
    body = (_header(archive, f"Environments of run {archive.run}", links) + f"<main>{controls}{table}"
            + "".join(blocks) + rejected_block + "</main>")
    attrs = {"data-page": "env-browser", "data-environments": str(slots), "data-rejected": str(len(archive.rejected))}
    return _page(f"Environments of run {archive.run}", attrs, body, _FILTER_SCRIPT)
