# Environment cards across training (the paper's Figure 2) and the browser of every environment a run designed or
# rejected, drawn by spade.paper.env_cards from the run's own archives (envs/set_*.json, rejected/, metrics.jsonl,
# summary.json). Per run: <results_dir>/figures/<run>_env_cards.{pdf,png,pdf.provenance.json} and
# <results_dir>/env_cards/<run>/{cards.html,environments.html}. The first observations are replayed in the sandbox
# with the run's agent.max_turns.
#
# `snakemake env_cards` renders them for the main runs of the toy config (the toy and its learning check; trained
# first if needed) and for every other configured run (the tool-use toy, the toy ablations, every run of a multi-run
# config such as configs/paper.yaml) that has finished training: those are read as they are, never trained by this
# target (as the paper artifacts read them), and a fingerprint of their archive files is a parameter, so the pages
# are redrawn when a run's archives change. Naming the run's target too (e.g. `snakemake toy_tool_use env_cards`)
# trains it first. Check the pages in headless Chromium with
# `python -m spade.browser_check <pages>` (docs/RUNNING.md, "Looking at a run").

from spade.paper import env_cards as _env_cards
from spade.paper.env_cards_archive import archive_files as _archive_files
from spade.paper.report import files_fingerprint as _files_fingerprint

# the module files of the cards code: the command and every spade.paper module it imports (what it reads, says,
# draws and writes)
ENV_CARDS_LIB = paper_script_lib(PAPER_SOURCE_DIR / "env_cards.py")
# the runs whose cards wait for their training: the main runs of a single-run config (the toy;
# a multi-run config's runs are GPU trainings, drawn only once they exist) and the extra runs whose target is on the
# command line
ENV_CARDS_BUILT_RUNS = ([] if MULTI_RUN else MAIN_RUNS) + [
    run
    for key, runs in (("toy_tool_use", TOY_TOOL_USE), ("toy_ablations", TOY_ABLATIONS))
    if key in sys.argv[1:]
    for run in runs
]
# the runs of the target env_cards: the built runs, and every other configured run that has a summary.json
ENV_CARDS_RUNS = ENV_CARDS_BUILT_RUNS + [
    run for run in RUNS if run not in ENV_CARDS_BUILT_RUNS and Path(OUT.run_summary(run)).is_file()
]


rule env_cards_of_run:
    """The environment cards (figure and page) and the environment browser of one run."""
    input:
        lib=ENV_CARDS_LIB,
        # a built run's summary.json (it is trained first); the others are read as they are
        summary=lambda wildcards: ([OUT.run_summary(wildcards.run)] if wildcards.run in ENV_CARDS_BUILT_RUNS else []),
    output:
        pdf=reported(OUT.env_cards_figure("{run}"), "env_cards_figure", "Environment cards", "{run}"),
        png=reported(_env_cards.output_files(OUT, "{run}")[1], "env_cards_figure", "Environment cards", "{run}"),
        provenance=reported(_env_cards.output_files(OUT, "{run}")[2], "env_cards_figure", "Environment cards", "{run}"),
        cards=reported(OUT.env_cards_page("{run}"), "env_cards_page", "Environment cards", "{run}"),
        browser=reported(OUT.env_browser_page("{run}"), "env_browser_page", "Environment cards", "{run}"),
    log:
        OUT.log("env_cards_{run}"),
    wildcard_constraints:
        run=RUN_PATTERN,
    conda:
        CPU_ENV
    params:
        run_dir=lambda wildcards: OUT.run_dir(wildcards.run),
        max_turns=lambda wildcards: RUNS[wildcards.run].agent.max_turns,
        python=CPU_PYTHON,
        # names, sizes and times of the archive files of a run read as it is ("" for a built run)
        archives=lambda wildcards: (
            ""
            if wildcards.run in ENV_CARDS_BUILT_RUNS
            else _files_fingerprint([wildcards.run], _archive_files(OUT.run_dir(wildcards.run)))
        ),
    shell:
        "{params.python} -m spade.paper.env_cards --run-dir {params.run_dir} --figure {output.pdf} --cards-html {output.cards}"
        " --browser-html {output.browser} --max-turns {params.max_turns} > {log} 2>&1"


rule env_cards:
    """Environment cards and the environment browser of the main runs and of every other finished run."""
    input:
        [path for run in ENV_CARDS_RUNS for path in _env_cards.output_files(OUT, run)],
