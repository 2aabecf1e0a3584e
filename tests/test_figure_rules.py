"""The paper figure rules' inputs (rules/paper_figures.smk): a figure's own code is its script, so editing one script
plans that figure alone, and editing src/spade/paper/figures.py (what every figure script imports) plans them all.

The plans are Snakemake's own (`snakemake -n paper_figures` on configs/default.yaml) in a copy of the repository's
tracked files. To start from a finished workflow without running it, every output the first plan lists gets an empty
placeholder and `snakemake --touch` marks the DAG up to date in its order (Snakemake 9's --touch touches existing
outputs only; it creates none). The placeholders include the configured toy run's outputs (its summary and
evaluations), which the default figure mapping (paper/toy/figure_runs.yaml) declares as inputs of most figures: so the
plans below must not bring back training or evaluation. Figure 6 is the edited script: it maps the toy run, the
configured one.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "paper" / "scripts"
FIGURE_RULES = {
    "paper_fig1_middle": "fig1_middle_games_transfer", "paper_fig1_right": "fig1_right_tool_use_transfer",
    "paper_fig5": "fig5_transfer_curves", "paper_fig6": "fig6_learnable_share", "paper_fig7": "fig7_tsne",
    "paper_fig10": "fig10_ablation_curves", "paper_fig11": "fig11_designer_reward", "paper_fig12": "fig12_model_size",
    "paper_fig13": "fig13_curriculum_breadth", "paper_fig14": "fig14_skills_curves",
    "paper_fig16": "fig16_reward_levels", "paper_fig17": "fig17_skill_win_rates",
    "paper_fig18": "fig18_windowed_diversity",
}
TARGET = "paper_figures"  # the group rule: no output, no command; planned whenever one of its inputs is


def snakemake(repo: Path, *args: str) -> str:
    run = subprocess.run([sys.executable, "-m", "snakemake", *args, "--configfile", "configs/default.yaml"], cwd=repo,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return run.stdout + run.stderr


def plan(repo: Path) -> list[tuple[str, dict]]:
    """(rule, {input, output, reason, ...}) of every job of `snakemake -n paper_figures`."""
    blocks = re.findall(r"^(?:local)?rule (\w+):\n(.*?)(?=^Shell command|^\[|\Z)", snakemake(repo, "-n", TARGET),
                        re.S | re.M)
    return [(rule, dict(re.findall(r"^    (\w+): (.*)$", body, re.M))) for rule, body in blocks]


def planned(repo: Path) -> dict[str, dict]:
    """rule -> its job, for a plan of one job per rule (any figure rule, and the group rule)."""
    jobs = plan(repo)
    assert len(jobs) == len({rule for rule, _ in jobs}), [rule for rule, _ in jobs]
    return dict(jobs)


def up_to_date(repo: Path) -> None:
    """`snakemake --touch` over the whole DAG, then check that nothing is planned."""
    snakemake(repo, "--touch", "--cores", "1", TARGET)
    assert "Nothing to be done" in snakemake(repo, "-n", TARGET)


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    """A copy of the tracked files in which every output of `snakemake paper_figures` exists and is up to date."""
    repo = tmp_path_factory.mktemp("repo").resolve()
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    for name in filter(None, tracked.split("\0")):
        source, dest = ROOT / name, repo / name
        if not source.is_symlink() and not source.is_file():
            continue  # deleted in the working tree
        dest.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            os.symlink(os.readlink(source), dest)
        else:
            shutil.copy2(source, dest)
    first = plan(repo)
    assert set(FIGURE_RULES) | {"train", "evaluate"} <= {rule for rule, _ in first}  # nothing exists yet
    for _, job in first:
        for output in filter(None, job.get("output", "").split(", ")):
            # a placeholder: Snakemake plans by existence and modification time (the model directory too)
            (repo / output).parent.mkdir(parents=True, exist_ok=True)
            (repo / output).touch()
    up_to_date(repo)
    return repo


def test_editing_one_figure_script_plans_that_figure_only(repo):
    script = repo / "paper" / "scripts" / "fig6_learnable_share.py"
    with script.open("a") as fh:
        fh.write("# an edit\n")
    jobs = planned(repo)
    assert set(jobs) == {"paper_fig6", TARGET}, sorted(jobs)
    reason = jobs["paper_fig6"]["reason"]
    assert reason.startswith("Updated input files: ") and reason.endswith("paper/scripts/fig6_learnable_share.py")
    assert "," not in reason, reason
    assert "results/runs/toy/summary.json" in jobs["paper_fig6"]["input"]  # the configured run: declared, not rebuilt
    up_to_date(repo)


def test_editing_the_shared_figure_module_plans_every_figure(repo):
    with (repo / "src" / "spade" / "paper" / "figures.py").open("a") as fh:
        fh.write("# an edit\n")  # not a bare touch: Snakemake skips an input whose recorded checksum still holds
    jobs = planned(repo)
    assert set(jobs) == set(FIGURE_RULES) | {TARGET}, sorted(jobs)
    scripts = {path.name for path in SCRIPTS.glob("*.py")}
    for rule, stem in FIGURE_RULES.items():
        inputs = jobs[rule]["input"].split(", ")
        # its own script and no other: editing another figure's script cannot plan this one
        assert [Path(p).name for p in inputs if Path(p).name in scripts] == [f"{stem}.py"], (rule, inputs)
        # lib: exactly the spade.paper modules the script imports, directly or through another of them
        lib = {Path(p).stem for p in inputs if Path(p).parent == repo / "src" / "spade" / "paper"}
        assert lib == paper_closure(repo, repo / "paper" / "scripts" / f"{stem}.py"), (rule, inputs)
        assert "figures" in lib, (rule, inputs)
    up_to_date(repo)


def imported_paper_modules(path: Path) -> set[str]:
    """The spade.paper modules named by the import lines of a script or module (read with a regex, independently of
    spade.paper.deps, which the rules use)."""
    text = path.read_text()
    modules = set(re.findall(r"^\s*(?:from|import) spade\.paper\.(\w+)", text, re.M))
    for names in re.findall(r"^\s*from spade\.paper import \(?([\w ,]+)", text, re.M):
        modules |= {name.split(" as ")[0].strip() for name in names.split(",") if name.strip()}
    return modules


def paper_closure(repo: Path, script: Path) -> set[str]:
    """The spade.paper modules the script imports, and those they import in turn."""
    found, todo = set(), [script]
    while todo:
        for module in imported_paper_modules(todo.pop()) - found:
            found.add(module)
            todo.append(repo / "src" / "spade" / "paper" / f"{module}.py")
    return found
