"""The mechanism check (issue 39): SPADE's own loop, trained designer against its control, one pair per seed.

    python paper/scripts/table_mechanism_check.py \
        --trained results/runs/toy_mechanism_s0 ... --control results/runs/toy_mechanism_control_s0 ... \
        --configs <job config of each trained run, then of each control run> --out results/tables/mechanism_check.md

Reads each run's environment-set archives and metrics (spade.analysis.mechanism): the integrity of the recipe's
designer rewards and of the delayed designer update in every run, then the properties of issues 39 and 48 (designer
samples with a nonzero advantage; (a) learnable share, (b) designer reward, second half, above the control's; (c)
designed difficulty rising with the agent), and (d) the held-out win rate of the last checkpoints, trained against
control, item by item: each run's ``mechanism_check_heldout`` result at its last checkpoint and the first trained
run's at step 0 (the base model every run starts from), found in the run folders (``spade.paths.ResultPaths``).
Each row says whether it holds; the last row is the verdict. A failed check is
written, not raised: the table is the report (the process exits 0 unless an input is missing or malformed).
Writes the Markdown table, a booktabs LaTeX table next to it, a JSON of the per-round series the figure draws
(``<stem>.rounds.json``) and a provenance sidecar.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from spade.paper.report import (ReportInputError, provenance_record, read_metrics, render_latex, render_markdown,
                                require_files, run_script, sidecar_path, write_json_atomic, write_text_atomic)


def load_runs(dirs: list, configs: list) -> dict:
    """seed -> (run name, config, sets, metrics, rounds) of each run folder, with its job config: what the check
    reads, each read once."""
    from spade.analysis.mechanism import design_rounds, read_sets
    from spade.config import load_config
    from spade.envs.checks import TEMPLATE_MARKERS

    out = {}
    for folder, path in zip(dirs, configs):
        config = load_config(path)
        template = config.designer.response_template
        if template not in TEMPLATE_MARKERS:
            raise ReportInputError(f"{path}: designer.response_template is {template!r}; a mechanism run needs one of "
                                   f"{sorted(TEMPLATE_MARKERS)}")
        if config.seed in out:
            raise ReportInputError(f"two runs of seed {config.seed}: {out[config.seed][0]} and {folder}")
        sets = read_sets(Path(folder))
        out[config.seed] = (Path(folder).name, config, sets, read_metrics(Path(folder) / "metrics.jsonl"),
                            design_rounds(sets, TEMPLATE_MARKERS[template]))
    return out


def read_scores(path: Path) -> dict:
    """{item id: score} of one evaluation result (its item records, named by the result's ``items_file``)."""
    result = json.loads(path.read_text())
    items = path.parent / result["items_file"]
    require_files(items)
    return {record["id"]: record["score"] for record in map(json.loads, items.read_text().splitlines())}


def heldout_result(run_dir: Path, step: int) -> Path:
    """The ``mechanism_check_heldout`` result of the run in ``run_dir`` at ``step``."""
    from spade.analysis.mechanism import HELDOUT_BENCHMARK
    from spade.paths import ResultPaths

    return Path(ResultPaths(str(run_dir.parent.parent)).eval_file(run_dir.name, step, HELDOUT_BENCHMARK))


def last_results(dirs: list, runs: dict) -> dict:
    """seed -> the held-out result of each run's last checkpoint (``runs``: ``load_runs`` of ``dirs``, in order)."""
    return {seed: heldout_result(Path(folder), config.selfplay.checkpoint_steps()[-1])
            for folder, (seed, (_, config, *_)) in zip(dirs, runs.items())}


def by_need(scores: dict) -> dict:
    """{NEED: win rate} of held-out scores ({item id 'need<N>/<i>': score})."""
    groups = {}
    for item, score in scores.items():
        groups.setdefault(int(item.split("/")[0].removeprefix("need")), []).append(score)
    return {need: sum(values) / len(values) for need, values in sorted(groups.items())}


def mechanism_rows(trained: dict, control: dict, heldout: tuple) -> tuple[list, bool]:
    """Rows (check, seed, value, detail, verdict) and the overall verdict. ``heldout``: (trained, control, base)
    held-out scores (``heldout_rows``)."""
    from spade.analysis.mechanism import heldout_rows, integrity, properties

    rows, ok = [], True
    for runs, is_trained in ((trained, True), (control, False)):
        for seed, (name, config, sets, metrics, _) in sorted(runs.items()):
            failures = integrity(sets, metrics, config, is_trained)
            ok &= not failures
            rows.append(("0. recipe rewards and delayed update" + ("" if is_trained else " (control)"), str(seed),
                         "holds" if not failures else f"{len(failures)} failures",
                         name + (": " + "; ".join(failures[:3]) if failures else ": every designer reward is the "
                                 "recipe's, every designer sample trained k steps after its set"), not failures))
    found, holds = properties({s: (v[4], v[3]) for s, v in trained.items()},
                              {s: (v[4], v[3]) for s, v in control.items()})
    more, held = heldout_rows(*heldout)
    ok &= holds and held
    rows += [(name, str(seed), value, detail, verdict) for name, seed, value, detail, verdict in found + more]
    return rows, ok


def series(runs: dict) -> dict:
    """Per seed, the per-round series the figure draws."""
    return {str(seed): {"run": name, "step": [r.step for r in rounds], "reward": [r.reward for r in rounds],
                        "learnable": [r.learnable for r in rounds], "need": [r.mean_need for r in rounds],
                        "accuracy": [r.accuracy for r in rounds]}
            for seed, (name, _, _, _, rounds) in sorted(runs.items())}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trained", nargs="+", type=Path, required=True, help="run folders that train the designer")
    parser.add_argument("--control", nargs="+", type=Path, required=True, help="their controls, in the same order")
    parser.add_argument("--configs", nargs="+", type=Path, required=True,
                        help="job config of each trained run, then of each control run")
    parser.add_argument("--out", type=Path, required=True, help="Markdown file to write (.tex goes next to it)")
    args = parser.parse_args(argv)
    n = len(args.trained)
    if len(args.configs) != len(args.trained) + len(args.control) or len(args.control) != n:
        raise ReportInputError(f"--trained ({n}) and --control ({len(args.control)}) need one run per seed each, and "
                               f"--configs one file per run ({len(args.configs)} given)")
    require_files(*args.configs, *[d / "metrics.jsonl" for d in [*args.trained, *args.control]])
    trained, control = load_runs(args.trained, args.configs[:n]), load_runs(args.control, args.configs[n:])
    if sorted(trained) != sorted(control):
        raise ReportInputError(f"trained seeds {sorted(trained)} and control seeds {sorted(control)} differ")
    base, last = heldout_result(args.trained[0], 0), (last_results(args.trained, trained),
                                                      last_results(args.control, control))
    heldout_files = [base, *last[0].values(), *last[1].values()]
    require_files(*heldout_files)
    heldout = (*({seed: read_scores(path) for seed, path in arm.items()} for arm in last), read_scores(base))
    rows, ok = mechanism_rows(trained, control, heldout)
    table = [(f"{name} [seed {seed}]", value, f"{'HOLDS' if verdict else 'FAILS'}: {detail}")
             for name, seed, value, detail, verdict in rows]
    table.append(("Mechanism check", "PASSED" if ok else "FAILED",
                  f"{sum(r[-1] for r in rows)} of {len(rows)} rows hold"))
    caption = "Mechanism check: SPADE's designer against its no-designer-training control, per seed"
    tex, rounds = args.out.with_suffix(".tex"), args.out.with_suffix(".rounds.json")
    write_text_atomic(args.out, render_markdown(table, caption))
    write_text_atomic(tex, render_latex(table, caption, "tab:mechanism-check"))
    held = {"base": by_need(heldout[2]), **{arm: {str(seed): by_need(scores) for seed, scores in heldout[i].items()}
                                             for i, arm in enumerate(("trained", "control"))}}
    write_json_atomic(rounds, {"trained": series(trained), "control": series(control), "heldout": held, "passed": ok})
    inputs = [*args.configs, *heldout_files] + [p for d in [*args.trained, *args.control]
                                for p in [d / "metrics.jsonl", *sorted((d / "envs").glob("set_*.json"))]]
    write_json_atomic(sidecar_path(args.out), provenance_record(
        "paper/scripts/table_mechanism_check.py", inputs, [args.out, tex, rounds],
        runs=[v[0] for v in [*trained.values(), *control.values()]]))
    print(f"wrote {args.out}, {tex} and {rounds}: mechanism check {'PASSED' if ok else 'FAILED'}")
    for quantity, value, detail in table:
        print(f"  {quantity}: {value} ({detail})")


if __name__ == "__main__":
    sys.exit(run_script(main))
