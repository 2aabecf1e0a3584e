"""Environment cards and the environment browser (spade.paper.env_cards), rendered from a small run folder written by the
trainer's own writers (write_archives, store_rejection, the validator's reports), including a designer environment
whose observation, code and hint carry HTML and script; the workflow's plan of `snakemake env_cards`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import asdict
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conftest import GOOD_STEP, env_source
from spade.paper import env_cards, env_cards_archive, env_cards_content, env_cards_pages
from spade.io import atomic_write_json
from spade.paper.report import ReportInputError, run_script

ROOT = Path(__file__).resolve().parents[1]

INJECTED_OBSERVATION = '<script>window.__injected = 1;</script><img src=x onerror="window.__injected = 2">'
INJECTED_HINT = '<b onmouseover="window.__injected = 4">Probe the board first</b> & answer \\boxed{d}.'
HOSTILE_CODE = '''
import random

BANNER = "</script><script>window.__injected = 3;</script>"


class HostileGrid:
    def __init__(self, max_turns=5, **kwargs):
        self.max_turns = max_turns
        self.reset()

    def reset(self, seed=None):
        self.rng = random.Random(seed)
        self.target = self.rng.randint(0, 9)
        self.board = [self.rng.randint(0, 3) for _ in range(4)]
        self.turn = 0
        text = OBSERVATION + " Guess a digit as \\\\boxed{d}. You have " + str(self.max_turns) + " turns."
        return text, {"turn": 0}

    def step(self, action):
        self.turn += 1
        won = action.strip() == "\\\\boxed{" + str(self.target) + "}"
        return ("Correct." if won else "Wrong."), float(won), won, self.turn >= self.max_turns, {}

    def solution(self):
        return "\\\\boxed{" + str(self.target) + "}"
'''.replace("OBSERVATION", repr(INJECTED_OBSERVATION))
REJECTED_RAW = "Here is my environment: <script>window.__injected = 5;</script> (no class at all)"
TOTAL_STEPS = 12


def _slot(env_id, skill, step, source, report=None, **fields):
    from spade.core.slots import EnvSlot

    slot = EnvSlot(env_id, skill, step, source, **fields)
    if report is not None:
        slot.attempts += 1
        slot.reports.append({**report.to_dict(), "generated_tokens": 17, "revision": 0})
        if report.valid:
            slot.valid, slot.code, slot.class_name, slot.kind = True, report.code, report.class_name, report.kind
    return slot


def build_run(pool, run_dir: Path, model_card: str = "tiny-random", steps: int = TOTAL_STEPS) -> Path:
    """A run folder as the trainer writes it: three environment sets (steps 0, 4, 8), one rejected candidate,
    metrics.jsonl and summary.json."""
    from spade.envs.validate import Validator, store_rejection
    from spade.train.trainer import write_archives

    validator = Validator(pool)
    hostile = validator.validate(HOSTILE_CODE)
    good = validator.validate(env_source(GOOD_STEP, name="DigitGuess"))
    rejected = validator.validate(REJECTED_RAW)
    assert hostile.valid and good.valid and not rejected.valid, (hostile.message, good.message, rejected.reason)
    store_rejection(run_dir / "rejected", REJECTED_RAW, rejected)
    seeds = [11, 12, 13, 14]
    early = [
        _slot("s00000-spatial_reasoning-0", "spatial_reasoning", 0, "designer", hostile, hint=INJECTED_HINT,
              hint_returns=[1.0, 0.0, 1.0, 1.0], hint_seeds=seeds, paired_returns=[0.0, 0.0, 1.0, 0.0],
              paired_seeds=seeds, wins=3, episodes=8, return_sum=3.0, regen_positive=1, regen_episodes=4,
              distinct_rewards=[0.0, 1.0], regret=0.5, designer_reward=0.7),
        _slot("s00000-spatial_reasoning-1", "spatial_reasoning", 0, "designer", rejected),
    ]
    middle = [_slot("s00004-logical_deduction-0", "logical_deduction", 4, "designer", good, hint="Try 7.",
                    hint_returns=[0.0, 0.0], hint_seeds=[21, 22], paired_returns=[0.0, 0.0], paired_seeds=[21, 22],
                    wins=0, episodes=8, return_sum=0.0, regret=0.0, designer_reward=0.2),
              _slot("s00004-logical_deduction-1", "logical_deduction", 4, "designer", good, hint="",
                    paired_returns=[1.0], paired_seeds=[31], wins=8, episodes=8, return_sum=8.0,
                    designer_reward=0.1)]
    late = [_slot("s00008-pattern_recognition-0", "pattern_recognition", 8, "backfill:digit_guess", good,
                  wins=2, episodes=8, return_sum=2.0)]
    rows = [asdict(slot) for slot in early + middle + late]
    write_archives(run_dir, rows)
    lines = [{"step": step, "env_win_rates": {row["env_id"]: 0.25 * (step % 4) for row in rows
                                              if row["step"] <= step < row["step"] + 4}} for step in range(steps)]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    atomic_write_json(run_dir / "summary.json", {"run": run_dir.name, "model_card": model_card, "steps": steps,
                                                 "checkpoints": [], "provenance": {}})
    return run_dir


def render(run_dir: Path, out: Path, pool, **kwargs) -> dict:
    return env_cards.render_run(run_dir, out / "figures" / "cards.pdf", out / "pages" / "cards.html",
                                out / "pages" / "environments.html", pool=pool, **kwargs)


@pytest.fixture(scope="module")
def rendered(pool, tmp_path_factory):
    base = tmp_path_factory.mktemp("env_cards")
    run_dir = build_run(pool, base / "runs" / "tiny_cards")
    done = render(run_dir, base / "out", pool, max_turns=3)
    return {"run_dir": run_dir, "done": done, "cards": done["cards_html"].read_text(),
            "browser": done["browser_html"].read_text(), "out": base / "out"}


class Tags(HTMLParser):
    """Every start tag with its attributes, and the text of each script element."""

    def __init__(self):
        super().__init__()
        self.tags, self.scripts, self._in_script = [], [], False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._in_script = True
            self.scripts.append("")

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts[-1] += data


def parse(page: str) -> Tags:
    tags = Tags()
    tags.feed(page)
    return tags


def test_cards_show_one_environment_per_third_with_its_archived_fields(rendered):
    cards = rendered["cards"]
    sections = re.findall(r'<section class="card[^"]*" data-card="(\w+)"(?: data-env="([^"]+)")?', cards)
    # early: the only valid designer environment of step 0; middle: the higher designer reward of step 4;
    # late: the backfilled one (no designer-written environment in steps 8-11)
    assert sections == [("early", "s00000-spatial_reasoning-0"), ("middle", "s00004-logical_deduction-0"),
                        ("late", "s00008-pattern_recognition-0")]
    early = cards.split('data-card="middle"')[0]
    assert '<h3 class="class-name">HostileGrid</h3>' in early
    assert "spatial_reasoning" in early and "(steps 0-3)" in early
    assert "0.38 (3/8 plays) over the set&#x27;s window" in early  # window: 3 wins of 8 no-hint plays
    assert "0.375 over the set&#x27;s window (8 plays)" in early  # mean no-hint return
    assert "0.75 (3/4 plays) at the regeneration step; without the hint there: 0.25 (1/4 plays)" in early
    assert "+0.500" in early and ">0.700<" in early  # regret, designer reward
    assert "You have 3 turns." in early  # replayed with the run's max_turns
    assert "&lt;b onmouseover=&quot;window.__injected = 4&quot;&gt;Probe the board first&lt;/b&gt; &amp;" in early
    assert "not recorded (run archives keep no grounding document)" in early
    # lines of code and state variables, counted statically (rng and turn are bookkeeping)
    assert '<dd data-field="lines of code">19</dd>' in early
    assert '<dd data-field="state variables">2: board, target</dd>' in early
    late = cards.split('data-card="late"')[1]
    assert "none: backfill:digit_guess is a built-in environment, not designed from a document" in late
    assert "none: the designer did not write this environment (backfill:digit_guess)" in late
    assert "none: no hinted play was recorded" in late and "none written" in late
    assert "not recorded: the archive holds no episode seed to replay" in late


def test_pages_and_figure_say_toy_scale(rendered):
    for page in (rendered["cards"], rendered["browser"]):
        assert '<span class="badge toy">TOY SCALE</span>' in page
        assert "TOY SCALE, NOT COMPARABLE" in page and "tiny-random, 12 steps" in page
    sidecar = json.loads(Path(str(rendered["done"]["figure"][0]) + ".provenance.json").read_text())
    assert sidecar["toy_scale"] is True and "TOY SCALE" in sidecar["scale_note"]
    assert sidecar["cards"] == {"early": ["s00000-spatial_reasoning-0", 0],
                                "middle": ["s00004-logical_deduction-0", 4],
                                "late": ["s00008-pattern_recognition-0", 8]}
    assert any("corpus document" in item for item in sidecar["not_recorded"])
    pdf, png = rendered["done"]["figure"]
    assert pdf.read_bytes()[:5] == b"%PDF-" and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 20_000  # three cards of text, not an empty canvas


def test_paper_scale_run_is_not_labelled_toy(pool, tmp_path):
    run_dir = build_run(pool, tmp_path / "runs" / "big", model_card="qwen3-30b-a3b-instruct-2507", steps=400)
    archive = env_cards_archive.load_run(run_dir)
    toy, note = env_cards_content.scale_note(archive)
    assert not toy and note.startswith("Paper scale: run big trained Qwen3-30B-A3B-Instruct-2507 for 400 steps")
    page = env_cards_pages.render_cards_html(archive, env_cards_content.pick_cards(archive),
                                             env_cards_content.no_replay(archive.envs), "environments.html", None)
    assert "TOY SCALE" not in page and '<span class="badge">paper scale</span>' in page


def test_browser_lists_every_slot_and_rejection_with_code_reports_and_window(rendered):
    browser = rendered["browser"]
    articles = re.findall(r'<article class="env (\w+)" id="([^"]+)" data-status="\w+" data-has-code="(\d)"', browser)
    assert [status for status, _, _ in articles] == ["valid", "empty", "valid", "valid", "valid", "rejected"]
    assert 'data-environments="5" data-rejected="1"' in browser
    # the empty slot: its rejected attempt's reason code, and a link to the kept candidate
    empty = browser.split('data-status="empty"')[1].split("</article>")[0]
    reason = re.search(r"<td><code>(\w+)</code></td>", empty).group(1)
    assert reason != "ok" and f"attempt 1: {reason}</a>" in empty
    rejected = browser.split('data-status="rejected"')[1]
    assert "attempt 1" in rejected and "s00000-spatial_reasoning-1" in rejected
    assert "Here is my environment: &lt;script&gt;window.__injected = 5;&lt;/script&gt;" in rejected
    # highlighted code of each valid slot: Pygments marks the class name
    assert browser.count('<span class="nc">HostileGrid</span>') == 1
    assert browser.count('<span class="nc">DigitGuess</span>') == 3
    # per-window statistics and the per-step win rates of metrics.jsonl (steps 0-3 of the first set)
    hostile = browser.split('data-env="s00000-spatial_reasoning-0"')[1].split("</article>")[0]
    assert "<td>steps 0-3</td>" in hostile and "<td>mean 0.750 over 4 plays</td>" in hostile
    assert re.findall(r"<tr><td>(\d+)</td><td>([\d.]+)</td></tr>", hostile) == [
        ("0", "0.00"), ("1", "0.25"), ("2", "0.50"), ("3", "0.75")]
    assert "<td>0, 1</td>" in hostile  # distinct rewards seen


def test_generated_text_cannot_inject_markup(rendered):
    """Observation, code, hint and the rejected raw text all hold <script> or event handlers; none becomes markup."""
    for name, expected_scripts in (("cards", 0), ("browser", 1)):
        page = rendered[name]
        tags = parse(page)
        assert sum(tag == "script" for tag, _ in tags.tags) == expected_scripts, name
        assert not [tag for tag, _ in tags.tags if tag in ("img", "b", "iframe", "object")], name
        handlers = [(tag, key) for tag, attrs in tags.tags for key in attrs if key.lower().startswith("on")]
        assert handlers == [], name
        assert "window.__injected" not in "".join(tags.scripts)
        assert "&lt;script&gt;window.__injected = 1;&lt;/script&gt;&lt;img src=x onerror=" in page
        policy = [attrs["content"] for tag, attrs in tags.tags if attrs.get("http-equiv") == "Content-Security-Policy"]
        assert len(policy) == 1 and "default-src 'none'" in policy[0], name
    browser = rendered["browser"]
    assert "&lt;/script&gt;&lt;script&gt;window.__injected = 3;&lt;/script&gt;" in browser  # inside the code
    (script,) = parse(browser).scripts
    assert script == env_cards_pages._FILTER_SCRIPT
    assert f"'sha256-{env_cards_pages._script_hash(script)}'" in browser


def test_without_replay_the_first_observation_is_not_recorded(pool, tmp_path, rendered):
    out = render(rendered["run_dir"], tmp_path, pool, replay=False)
    cards = out["cards_html"].read_text()
    assert "You have 3 turns" not in cards
    assert cards.count("not recorded (run archives keep no observation; replay is off)") == 3


def test_phases_cut_the_steps_into_thirds():
    assert env_cards_content.phase_windows(12) == [("early", 0, 4), ("middle", 4, 8), ("late", 8, 12)]
    assert env_cards_content.phase_windows(40) == [("early", 0, 14), ("middle", 14, 27), ("late", 27, 40)]
    assert env_cards_content.phase_windows(2) == [("early", 0, 1), ("middle", 1, 2), ("late", 2, 2)]
    assert env_cards_content.steps_label(2, 2) == "no steps" and env_cards_content.steps_label(1, 2) == "step 1"


def test_bad_inputs_name_the_file(tmp_path, pool):
    with pytest.raises(ReportInputError, match="does not exist"):
        env_cards_archive.load_run(tmp_path / "nowhere")
    run_dir = tmp_path / "run"
    (run_dir / "envs").mkdir(parents=True)
    with pytest.raises(ReportInputError, match="holds no environment-set archive"):
        env_cards_archive.load_run(run_dir)
    (run_dir / "envs" / "set_00000.json").write_text("{not json")
    with pytest.raises(ReportInputError, match=r"set_00000\.json \(environment-set archive\) is not valid JSON"):
        env_cards_archive.load_run(run_dir)
    (run_dir / "envs" / "set_00000.json").write_text(json.dumps({"environments": [{"step": 0, "valid": True}]}))
    with pytest.raises(ReportInputError, match=r"set_00000\.json: environments\[0\] lacks 'env_id'"):
        env_cards_archive.load_run(run_dir)
    (run_dir / "envs" / "set_00000.json").write_text(json.dumps({"environments": [
        {"env_id": "a", "step": 0, "valid": False}]}))
    (run_dir / "rejected" / "abc").mkdir(parents=True)
    with pytest.raises(ReportInputError, match=r"rejected candidate .*abc has no report\.json"):
        env_cards_archive.load_run(run_dir)
    (run_dir / "rejected" / "abc" / "report.json").write_text("[]")
    with pytest.raises(ReportInputError, match=r"abc/report\.json is not a validation report"):
        env_cards_archive.load_run(run_dir)
    (run_dir / "rejected" / "abc" / "report.json").unlink()
    (run_dir / "rejected" / "abc").rmdir()
    with pytest.raises(ReportInputError, match=r"--figure must name a \.pdf file"):
        env_cards.render_run(run_dir, tmp_path / "x.png", tmp_path / "c.html", tmp_path / "e.html", pool=pool)
    assert run_script(env_cards.main, ["--run-dir", str(tmp_path / "nowhere"), "--figure", str(tmp_path / "f.pdf"),
                                       "--cards-html", str(tmp_path / "c.html"), "--browser-html",
                                       str(tmp_path / "e.html"), "--no-replay"]) == 2


def _plan_env_cards(tmp_path, config: str, finished_run: str, steps: int) -> tuple[str, list]:
    """`snakemake -n env_cards` with ``config`` in ``tmp_path``, where ``finished_run`` has a summary already;
    returns the plan's text and its (rule, job text) pairs."""
    finished = tmp_path / "results" / "runs" / finished_run
    (finished / "envs").mkdir(parents=True)
    (finished / "summary.json").write_text(json.dumps({"run": finished_run, "steps": steps}))
    run = subprocess.run([sys.executable, "-m", "snakemake", "-n", "env_cards", "--configfile",
                          str(ROOT / config), "--directory", str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout, re.findall(r"rule (\w+):\n(.*?)(?=\n\n|\Z)", run.stdout, re.S)


def test_snakemake_env_cards_plans_the_main_runs_and_reads_finished_extra_runs(tmp_path):
    """`snakemake env_cards -n`: the toy (trained first), with its own agent.max_turns; the finished tool-use toy is
    rendered from what is on disk, never trained by this target (nor are the learning check's runs, since issue 48
    not main runs)."""
    plan, jobs = _plan_env_cards(tmp_path, "configs/default.yaml", "toy_tool_use", 2)
    cards = {re.search(r"wildcards: run=(\w+)", body).group(1): body for rule, body in jobs
             if rule == "env_cards_of_run"}
    assert sorted(cards) == ["toy", "toy_tool_use"]
    trained = sorted(re.search(r"wildcards: run=(\w+)", body).group(1) for rule, body in jobs if rule == "train")
    assert trained == ["toy"]
    assert "results/runs/toy/summary.json" in cards["toy"] and "summary.json" not in cards["toy_tool_use"]
    assert "results/figures/toy_env_cards.pdf" in cards["toy"]
    assert "results/env_cards/toy/environments.html" in cards["toy"]
    assert "--max-turns 2 " in plan and "--max-turns 8 " in plan  # the toy's and the tool-use toy's


def test_snakemake_env_cards_on_the_paper_config_trains_nothing(tmp_path):
    """With the multi-run paper config, `snakemake env_cards -n` draws only the runs whose results exist, read as they
    are (the paper's max_turns, 25), and plans no training."""
    plan, jobs = _plan_env_cards(tmp_path, "configs/paper.yaml", "spade_games_30b", 400)
    assert sorted(rule for rule, _ in jobs if rule != "env_cards") == ["env_cards_of_run"]
    assert "wildcards: run=spade_games_30b" in plan and "--max-turns 25 " in plan


def test_a_rehearsal_runs_pages_say_rehearsal_not_toy_scale(pool, tmp_path):
    """A rehearsal run (summary.json "rehearsal": a paper run file on a tiny model) keeps its paper model card: its badge
    says REHEARSAL, as its banner does. Mutation: the badge's fixed 'TOY SCALE' of before fails the first assert."""
    run_dir = build_run(pool, tmp_path / "runs" / "spade_games_4b", model_card="qwen3-4b-instruct-2507", steps=4)
    summary = json.loads((run_dir / "summary.json").read_text())
    (run_dir / "summary.json").write_text(json.dumps({**summary, "rehearsal": {"model": "tiny-qwen3-4b"}}))
    archive = env_cards_archive.load_run(run_dir)
    page = env_cards_pages.render_cards_html(archive, env_cards_content.pick_cards(archive),
                                             env_cards_content.no_replay(archive.envs), "environments.html", None)
    assert '<span class="badge toy">REHEARSAL</span>' in page and "TOY SCALE" not in page
    assert env_cards_content.scale_note(archive)[1].startswith("REHEARSAL")
