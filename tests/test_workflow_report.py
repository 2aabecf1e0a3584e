"""Snakemake's report (`snakemake --report results/report.html`): which outputs the rules register with report() and
under which caption and category, what the captions read (spade.paper.workflow_report), every caption rendered as Snakemake
renders it, the error when there is nothing to report, and the headless-Chromium check of a report (passing and
failing). The report of a real pipeline run is checked in tests/test_pipeline.py."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jinja2
import pytest
from docutils.core import publish_parts

from spade import browser_check

from spade.paper import workflow_report
from spade.paper.report import ReportInputError

ROOT = Path(__file__).resolve().parents[1]
CAPTIONS = ROOT / "paper" / "captions"
MARK = "REGISTERED-OUTPUTS:"

# parses the workflow through Snakemake's API (as `snakemake` does, without building a DAG) and prints every rule's
# outputs with their report() flags, the names of its inputs and params, and the report's global description
PARSE = r"""
import json, sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.io import get_flag_value, is_flagged
from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings

root, configfile, workdir = (Path(arg) for arg in sys.argv[1:4])
with SnakemakeApi(OutputSettings()) as api:
    workflow = api.workflow(resource_settings=ResourceSettings(cores=1),
                            config_settings=ConfigSettings(configfiles=[configfile]),
                            snakefile=root / "Snakefile", workdir=workdir)._workflow
    rules = []
    for rule in workflow.rules:
        names = {index: name for name, (index, _) in rule.output._names.items()}
        outputs = []
        for index, file in enumerate(rule.output):
            entry = {"name": names.get(index), "path": str(file)}
            if is_flagged(file, "report"):
                flag = get_flag_value(file, "report")
                entry["report"] = {"caption": flag.caption.get_path_or_uri(secret_free=True) if flag.caption else None,
                                   "category": flag.category, "subcategory": flag.subcategory}
            outputs.append(entry)
        rules.append({"name": rule.name, "output": outputs, "input": sorted(rule.input._names),
                      "params": sorted(rule.params._names), "wildcards": sorted(rule.wildcard_names)})
    text = workflow.report_text.get_path_or_uri(secret_free=True) if workflow.report_text else None
print("%s" + json.dumps({"rules": rules, "report_text": text}))
""" % MARK

# the rules whose outputs the report must hold (all of their outputs, except library_check's check.json)
REPORTED_RULES = {"library_check", "results_table", "run_table", "training_figure", "suite_table", "select_checkpoint",
                  "eval_throughput", "env_cards_of_run", "paper_env_sources_table", "paper_env_sources_figure",
                  "paper_pdf"}


@pytest.fixture(scope="module")
def workflows(tmp_path_factory):
    """config -> the parsed workflow's rules (PARSE), for the toy config and the paper's multi-run config."""
    parsed = {}
    for config in ("configs/default.yaml", "configs/paper.yaml"):
        run = subprocess.run([sys.executable, "-c", PARSE, str(ROOT), str(ROOT / config),
                              str(tmp_path_factory.mktemp("workdir"))], capture_output=True, text=True, timeout=300)
        assert run.returncode == 0 and MARK in run.stdout, (run.stdout + run.stderr)[-3000:]
        parsed[config] = json.loads(run.stdout.split(MARK, 1)[1])
    return parsed


def registered(parsed: dict) -> list:
    """(rule, output) of every output flagged with report()."""
    return [(rule, output) for rule in parsed["rules"] for output in rule["output"] if "report" in output]


@pytest.mark.parametrize("config", ["configs/default.yaml", "configs/paper.yaml"])
def test_every_registered_output_has_a_caption_and_a_category(workflows, config):
    parsed = workflows[config]
    flagged = registered(parsed)
    assert len(flagged) > 60, len(flagged)
    for rule, output in flagged:
        flag = output["report"]
        caption = Path(flag["caption"]).resolve()
        assert caption.parent == CAPTIONS and caption.is_file(), (rule["name"], caption)
        assert flag["category"] in workflow_report.CATEGORIES, (rule["name"], flag["category"])
        assert flag["subcategory"], rule["name"]
        assert output["path"].startswith("results/"), output["path"]
    assert Path(parsed["report_text"]).resolve() == CAPTIONS / "workflow.rst"


def test_the_tables_and_figures_are_registered(workflows):
    rules = {rule["name"]: rule for rule in workflows["configs/default.yaml"]["rules"]}
    artifacts = {name for name in rules if re.fullmatch(r"paper_(table\d|fig\d+(_\w+)?|number_\w+)", name)}
    assert len(artifacts) == 7 + 13 + 8  # tables 1, 2, 3, 5, 6, 7, 8; 13 figures; 8 groups of numbers
    for name in sorted(REPORTED_RULES | artifacts):
        outputs = rules[name]["output"]
        unregistered = [out["path"] for out in outputs if "report" not in out and out["name"] != "json"]
        assert not unregistered, (name, unregistered)
    # the report's categories hold what their names say
    category = {rule["name"]: out["report"]["category"] for rule, out in registered(workflows["configs/default.yaml"])}
    assert category["paper_table3"] == category["paper_fig10"] == "Ablations"
    assert category["paper_table1"] == "Paper tables" and category["paper_fig5"] == "Paper figures"
    assert category["run_table"] == "Run" and category["suite_table"] == "Evaluation"
    assert category["env_cards_of_run"] == "Environment cards"
    assert category["paper_env_sources_figure"] == "Environment sources"
    assert category["paper_number_games_gain"] == category["paper_pdf"] == "Paper text"
    # every registered rule is one the report's default target can reach (no wildcard but `run`)
    assert all(set(rule["wildcards"]) <= {"run"} for rule, _ in registered(workflows["configs/default.yaml"]))


def test_every_caption_file_is_used(workflows):
    used = {Path(out["report"]["caption"]).resolve() for parsed in workflows.values() for _, out in registered(parsed)}
    assert used | {CAPTIONS / "workflow.rst"} == set(CAPTIONS.glob("*.rst"))


# ----- the facts the captions read ------------------------------------------------------------------------------
def write_json(path: Path, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def summary(model_card: str, steps: int, config_hash: str) -> dict:
    return {"model_card": model_card, "steps": steps, "provenance": {"config_hash": config_hash, "seed": 0}}


def test_report_mode_reads_the_command_line():
    assert workflow_report.report_mode(["--report", "results/report.html"]) == (True, True)
    assert workflow_report.report_mode(["--report=results/report.zip", "paper"]) == (True, True)
    assert workflow_report.report_mode(["--report", "r.html", "--report-after-run"]) == (True, False)
    assert workflow_report.report_mode(["-n", "--report-stylesheet", "x.css"]) == (False, False)
    assert workflow_report.report_mode([]) == (False, False)


def test_run_facts_take_scale_and_hash_from_the_summary(tmp_path):
    runs = tmp_path / "runs"
    write_json(runs / "toy" / "summary.json", summary("smollm2-135m", 4, "aaaa"))
    write_json(runs / "big" / "summary.json", summary("Qwen3-8B", 400, "bbbb"))
    toy = workflow_report.run_facts(runs, "toy", "results/configs/toy-123.yaml", "smollm2-135m", 4)
    assert toy == {"name": "toy", "folder": f"{runs.as_posix()}/toy", "config_file": "results/configs/toy-123.yaml",
                   "config_hash": "aaaa", "trained": True, "scale": "smollm2-135m, 4 steps", "toy": True}
    big = workflow_report.run_facts(runs, "big")
    assert big["toy"] is False and big["config_hash"] == "bbbb" and big["scale"] == "Qwen3-8B, 400 steps"
    # a paper backbone trained for fewer steps than the paper's is toy scale
    write_json(runs / "short" / "summary.json", summary("Qwen3-8B", 40, "cccc"))
    assert workflow_report.run_facts(runs, "short")["toy"] is True
    # an untrained configured run: its scale from the config, nothing recorded
    pending = workflow_report.run_facts(runs, "later", "results/configs/later-1.yaml", "Qwen3-8B", 400)
    assert pending["trained"] is False and pending["toy"] is False and pending["config_hash"] == ""


def test_sidecar_facts_read_every_sidecar_form(tmp_path):
    runs = tmp_path / "runs"
    write_json(runs / "toy" / "summary.json", summary("smollm2-135m", 4, "aaaa"))
    table = write_json(tmp_path / "t.md.provenance.json", {
        "banner": "TOY SCALE, NOT COMPARABLE: ...", "runs": {"toy": {"config_hash": ["aaaa", "eval1", "aaaa"]}}})
    facts = workflow_report.sidecar_facts(table, runs)
    assert facts["runs"] == [{"name": "toy", "config_hashes": "aaaa, eval1", "scale": "smollm2-135m, 4 steps",
                              "toy": True}]
    assert facts["toy"] is True and facts["banner"].startswith("TOY SCALE")
    # a figure: one hash per run, no banner; a run without a summary has an unknown scale, which is not the paper's
    figure = write_json(tmp_path / "f.pdf.provenance.json", {"banner": "", "runs": {"gone": {"config_hash": "dddd"}}})
    facts = workflow_report.sidecar_facts(figure, runs)
    assert facts["runs"][0]["config_hashes"] == "dddd" and facts["runs"][0]["scale"] == "model unknown, steps unknown"
    assert facts["toy"] is True and facts["banner"] == ""
    # the environment cards: one run, its hash from the summary, the scale note as banner
    cards = write_json(tmp_path / "c.pdf.provenance.json", {"run": "toy", "scale_note": "TOY SCALE ..."})
    facts = workflow_report.sidecar_facts(cards, runs)
    assert facts["runs"][0]["config_hashes"] == "aaaa" and facts["banner"] == "TOY SCALE ..."
    # no run read at all
    assert workflow_report.sidecar_facts(write_json(tmp_path / "n.json", {"runs": {}}), runs)["runs"] == []


def test_bad_sidecars_and_summaries_are_named(tmp_path):
    broken = tmp_path / "x.md.provenance.json"
    broken.write_text("{not json")
    with pytest.raises(ReportInputError, match="x.md.provenance.json is not valid JSON"):
        workflow_report.sidecar_facts(broken, tmp_path)
    with pytest.raises(ReportInputError, match="holds no JSON object"):
        workflow_report.sidecar_facts(write_json(tmp_path / "list.json", [1, 2]), tmp_path)
    (tmp_path / "runs" / "toy").mkdir(parents=True)
    (tmp_path / "runs" / "toy" / "summary.json").write_text("[]")
    with pytest.raises(ReportInputError, match="summary.json holds no JSON object"):
        workflow_report.run_facts(tmp_path / "runs", "toy")


@pytest.mark.parametrize("trained, scale", [({}, "none"), ({"toy": 4}, "toy"), ({"big": 400}, "paper"),
                                            ({"toy": 4, "big": 400}, "mixed")])
def test_report_facts_say_the_scale_of_the_results(tmp_path, trained, scale):
    cards = {"toy": "smollm2-135m", "big": "Qwen3-30B-A3B-Instruct-2507"}
    for run, steps in trained.items():
        write_json(tmp_path / "runs" / run / "summary.json", summary(cards[run], steps, f"{run}-hash"))
    configured = {run: (f"results/configs/{run}-1.yaml", cards[run], 4 if run == "toy" else 400) for run in cards}
    facts = workflow_report.report_facts(str(tmp_path), configured, ["toy", "big"], [],
                                         [tmp_path / "configs/x.yaml", "/elsewhere/y.yaml"],
                                         "results/configs/toy-1.yaml", repo=str(tmp_path))
    assert facts["scale"] == scale
    # paths in the repository are shown relative to it (the captions strip facts["repo"])
    assert facts["config_files"] == ["configs/x.yaml", "/elsewhere/y.yaml"] and facts["repo"] == f"{tmp_path}/"
    assert facts["toy_runs"] == (["toy"] if "toy" in trained else [])
    assert "400 steps" in facts["paper_setting"] and "Qwen3-8B" in facts["paper_setting"]


# ----- every caption, rendered as Snakemake renders it ----------------------------------------------------------
class Items(list):
    """A job's input, output or params as a caption sees them: a list whose named items are attributes too."""

    def __init__(self, named: dict, unnamed: tuple = ()):
        super().__init__([*named.values(), *unnamed])
        self.__dict__.update(named)


def render(template: str, context: dict) -> str:
    """A caption as Snakemake's report renders it (Jinja2 with trim_blocks and lstrip_blocks, then docutils), but
    strict: an undefined name and any reStructuredText warning fail."""
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)
    text = env.from_string(template).render(**context)
    return publish_parts(text, writer="html", settings_overrides={"halt_level": 2, "report_level": 2})["body"]


COMPARISON_SIDECAR = "results/paper/tables/env_sources.md.provenance.json"


def job_context(rule: dict, run: str, facts: dict) -> dict:
    """The `snakemake` object of a job of `rule` (for run `run` where the rule has that wildcard)."""
    outputs = [re.sub(r"\{run[^}]*\}", run, out["path"]) for out in rule["output"]]
    named_out = {out["name"]: path for out, path in zip(rule["output"], outputs) if out["name"]}
    # the comparison figure's input `table` is the comparison table's sidecar, whose facts its caption shows
    inputs = Items({name: COMPARISON_SIDECAR if name == "table" else f"/repo/{name}.input" for name in rule["input"]},
                   () if rule["input"] else ("a", "b"))
    params = Items({name: f"<{name}>" for name in rule["params"]})
    wildcards = Items({"run": run} if "run" in rule["wildcards"] else {})
    snakemake = type("Snakemake", (), {"input": inputs, "output": Items(named_out, () if named_out else tuple(outputs)),
                                      "params": params, "wildcards": wildcards, "rule": rule["name"],
                                      "config": {"report": facts}})
    return {"snakemake": snakemake, "categories": {}, "files": []}


@pytest.mark.parametrize("scale", ["toy", "paper"])
def test_every_caption_renders_for_every_registered_output(workflows, tmp_path, monkeypatch, scale):
    """Each registered rule's caption, with the facts of a toy (or a paper-scale) run `r1` and, for the paper
    artifacts, a sidecar naming it: no undefined name, valid reStructuredText, and the run, its config file and hash
    and its scale are said."""
    monkeypatch.chdir(tmp_path)
    card, steps = ("smollm2-135m", 4) if scale == "toy" else ("Qwen3-8B", 400)
    write_json(tmp_path / "results" / "runs" / "r1" / "summary.json", summary(card, steps, "feedc0ffee"))
    flagged = registered(workflows["configs/default.yaml"])
    sidecars = []
    for rule, output in flagged:
        if output["path"].endswith(".provenance.json") and "{" not in output["path"]:
            sidecars.append(output["path"])
            write_json(tmp_path / output["path"], {"banner": "", "runs": {"r1": {"config_hash": "feedc0ffee"}}})
    facts = workflow_report.report_facts("results", {"r1": ("results/configs/r1-0123.yaml", card, steps)}, ["r1"],
                                         sidecars, ["configs/default.yaml"], "results/configs/r1-0123.yaml")
    seen = set()
    for rule, output in flagged:
        caption = Path(output["report"]["caption"]).resolve()
        if (rule["name"], caption) in seen:
            continue
        seen.add((rule["name"], caption))
        html = render(caption.read_text(), job_context(rule, "r1", facts))
        assert "System Message" not in html and len(html) > 300, (rule["name"], html)
        if rule["wildcards"] or rule["name"] in ("results_table", "suite_table"):
            assert "r1-0123.yaml" in html and "feedc0ffee" in html, (rule["name"], html)
        elif "provenance" in {out["name"] for out in rule["output"]} and rule["name"] != "paper_table5":
            assert "r1" in html and "feedc0ffee" in html, (rule["name"], html)
        if rule["wildcards"] or rule["name"] in ("results_table", "suite_table") or "feedc0ffee" in html:
            assert ("Toy scale" in html or "toy scale" in html) == (scale == "toy"), (rule["name"], html)
    # the paper artifacts with no run of ours found say so
    empty = {**facts, "artifacts": {}}
    for rule, output in flagged:
        if rule["name"] == "paper_table1":
            html = render(Path(output["report"]["caption"]).resolve().read_text(), job_context(rule, "r1", empty))
            assert "No run of ours was found" in html and "Toy scale" not in html


@pytest.mark.parametrize("scale, words", [("toy", "Toy scale."), ("mixed", "Mixed scale."), ("paper", "Paper scale."),
                                          ("none", "No run has finished training yet")])
def test_the_workflow_description_states_the_scale(scale, words):
    facts = {"results_dir": "results", "config_files": ["configs/default.yaml"], "scale": scale,
             "workflow_config_file": "results/configs/toy-1.yaml", "paper_setting": workflow_report.paper_setting(),
             "toy_runs": ["tiny_run"], "paper_runs": ["spade_games_30b"]}
    html = render((CAPTIONS / "workflow.rst").read_text(), {"snakemake": type("S", (), {"config": {"report": facts}}),
                                                           "categories": {}, "files": []})
    assert words in html and "configs/default.yaml" in html and "results/configs/toy-1.yaml" in html
    assert ("tiny_run" in html) == (scale in ("toy", "mixed"))
    assert ("spade_games_30b" in html) == (scale in ("paper", "mixed"))


def test_a_report_with_nothing_to_show_fails_saying_so(tmp_path):
    run = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory",
                          str(tmp_path), "--configfile", str(ROOT / "configs/default.yaml"), "--report",
                          str(tmp_path / "report.html")], capture_output=True, text=True, timeout=300)
    assert run.returncode != 0
    assert "nothing to report: none of the workflow's tables and figures exists under results/" in run.stderr
    assert not (tmp_path / "report.html").exists()


# ----- the headless-Chromium check of a report ------------------------------------------------------------------
SMALL_WORKFLOW = '''
report: "description.rst"

rule all:
    input: "out/numbers.txt", "out/picture.svg"

rule numbers:
    output: report("out/numbers.txt", caption="numbers.rst", category="Tables", subcategory="text")
    shell: "seq 3 > {output}"

rule picture:
    output: report("out/picture.svg", caption="picture.rst", category="Figures", subcategory="drawings")
    run:
        with open(output[0], "w") as svg:
            svg.write('<svg xmlns="http://www.w3.org/2000/svg" width="40" height="40"><circle cx="20" cy="20" r="15"/></svg>')
'''


@pytest.fixture(scope="module")
def small_report(tmp_path_factory):
    """Snakemake's report of a two-rule workflow: a text file and a picture, each with its caption."""
    base = tmp_path_factory.mktemp("small_report")
    (base / "Snakefile").write_text(SMALL_WORKFLOW)
    (base / "description.rst").write_text("A small workflow\n================\n\nIt writes numbers and a circle.\n")
    (base / "numbers.rst").write_text("Three numbers written by rule ``{{ snakemake.rule }}``.\n")
    (base / "picture.rst").write_text("A black circle drawn by rule ``{{ snakemake.rule }}``.\n")
    for args in ([], ["--report", "report.html"]):
        run = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", *args], cwd=base,
                             capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr[-3000:]
    return base / "report.html"


def edit_report(report: Path, target: Path, variable: str, change) -> Path:
    """A copy of `report` at `target` with the JSON of its script variable `variable` passed through `change`."""
    html = report.read_text()
    pattern = re.compile(rf'(<script id="[^"]+">\s*var {variable} = )(.*?)(;\s*</script>)', re.S)
    match = pattern.search(html)
    value = change(json.loads(match.group(2)))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(html[:match.start(2)] + json.dumps(value) + html[match.end(2):])
    return target


def without_caption(results: dict) -> dict:
    first = next(iter(results))
    return {**results, first: {**results[first], "caption": ""}}


def with_broken_picture(results: dict) -> dict:
    return {path: {**entry, "data_uri": "data:image/svg+xml;base64,bm90IGFuIGltYWdl"} if path.endswith(".svg")
            else entry for path, entry in results.items()}


def without_listing(categories: dict) -> dict:
    return {name: subcategories for name, subcategories in categories.items() if name != "Figures"}


chromium = pytest.mark.skipif(browser_check.find_chromium() is None,
                              reason="Chromium is not installed: `apt-get install chromium` as root (or "
                                     "SPADE_BROWSER=1 ./setup.sh), or point SPADE_CHROMIUM at a Chromium binary")


@chromium
def test_a_snakemake_report_passes_and_broken_ones_fail(small_report, tmp_path):
    broken = {
        "no_caption": edit_report(small_report, tmp_path / "no_caption" / "report.html", "results", without_caption),
        "unlisted": edit_report(small_report, tmp_path / "unlisted" / "report.html", "categories", without_listing),
        "no_description": edit_report(small_report, tmp_path / "no_description" / "report.html", "workflow_desc",
                                      lambda _: ""),
        "bad_picture": edit_report(small_report, tmp_path / "bad_picture" / "report.html", "results",
                                   with_broken_picture),
    }
    throwing = tmp_path / "throwing" / "report.html"
    throwing.parent.mkdir()
    throwing.write_text(small_report.read_text().replace("</body>", "<script>console.error('broken report');</script>"
                                                                    "</body>"))
    pages = [small_report, *broken.values(), throwing]
    good, no_caption, unlisted, no_description, bad_picture, error = browser_check.check_pages(pages,
                                                                                              tmp_path / "shots")
    assert good.ok, (good.problems, good.console)
    assert good.dom["page"] == "snakemake-report" and len(good.dom["results"]) == 2
    assert set(good.dom["categories"]) == {"Tables", "Figures"}
    assert "Three numbers written by rule numbers." in good.dom["captions"]["out/numbers.txt"]["shown"]
    assert good.dom["viewed"] == {"out/picture.svg": {"kind": "img", "shown": True, "width": 40}}
    for name in ("report.png", "report_listing.png", "report_caption.png"):
        assert (tmp_path / "shots" / f"{small_report.parent.name}_{name}").read_bytes()[:4] == b"\x89PNG"
    assert any("out/numbers.txt has no caption" in p for p in no_caption.problems), no_caption.problems
    assert any("out/picture.svg is in no category" in p for p in unlisted.problems), unlisted.problems
    assert "the report has no workflow description" in no_description.problems
    assert any("out/picture.svg opens in the viewer but does not display" in p for p in bad_picture.problems), \
        bad_picture.problems
    assert any("console: console.error: broken report" in p for p in error.problems), error.problems
    assert shutil.which(browser_check.find_chromium())
