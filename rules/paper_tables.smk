# Paper tables 1, 2, 3, 5, 6, 7 and 8, each by its own script, with the paper's reported values beside ours.
# `snakemake paper_tables` writes <results_dir>/paper/tables/<table>.md, <table>.tex and
# <table>.md.provenance.json (inputs with SHA-256, and one record per cell of ours).
#
# Declared inputs: the script, the shared logic (src/spade/paper_tables.py), the run mapping
# (paper/table_runs.yaml), the reported CSV (paper/reported/) and, for Table 5, the two recipe files. Editing a
# script or a reported CSV reruns that table only; editing the shared logic or the mapping reruns those using it.
#
# Results of the runs a table maps are read from <results_dir>/runs/<run>/ by the script. They are NOT declared
# as inputs, on purpose: those files are outputs of the train/evaluate/select_checkpoint rules, so declaring them
# would put the jobs that made them into this DAG with the *current* config's parameters, and Snakemake would
# redo (retrain, re-evaluate) a paper run whenever the current config is another one (the toy one, say).
# Instead a fingerprint of those files (names, sizes, modification times; spade.paper_tables.run_fingerprint)
# is a parameter, so a table reruns when a result it reads changes. The one exception is the configured runs
# (PAPER_BUILT_RUNS in rules/common.smk): those the mapping names have their outputs declared as inputs, so they are built first.

from spade import paper_tables as _paper_tables

TABLE_RUNS = repo_path(SPADE.paper.table_runs)  # which run stands for which paper row (config key paper.table_runs)
REPORTED_DIR = Path(workflow.basedir) / "paper" / "reported"
RECIPE_DIR = Path(workflow.basedir) / "configs" / "recipes"
PAPER_TABLES_LIB = str(Path(workflow.basedir) / "src" / "spade" / "paper_tables.py")  # the logic all scripts share
PAPER_TABLES_DIR = f"{OUT.root}/paper/tables"
RUNS_ROOT = OUT.root + "/runs"
PAPER_TABLE_STEMS = {
    "table1": "table1_games",
    "table2": "table2_tool_use",
    "table3": "table3_ablations",
    "table5": "table5_hyperparameters",
    "table6": "table6_ablations_full",
    "table7": "table7_env_quality",
    "table8": "table8_diversity",
}


def paper_table_files(table):
    """The three outputs of a table: Markdown, LaTeX and the provenance sidecar of the Markdown file."""
    md = f"{PAPER_TABLES_DIR}/{PAPER_TABLE_STEMS[table]}.md"
    return {"md": md, "tex": md[: -len(".md")] + ".tex", "provenance": md + ".provenance.json"}


def paper_table_reported(table):
    return str(REPORTED_DIR / f"{PAPER_TABLE_STEMS[table]}.csv")


def paper_table_script(table):
    return script(f"{PAPER_TABLE_STEMS[table]}.py")


def configured_run_inputs(table):
    """The configured runs' outputs that the table reads, for each run the mapping names (else nothing)."""

    def inputs(wildcards):
        rules_by_run = _paper_tables.step_rules(_paper_tables.load_table_runs(TABLE_RUNS), table)
        files = []
        for run in (run for run in PAPER_BUILT_RUNS if run in rules_by_run):
            if table in ("table7", "table8"):  # environment archives and metrics: complete once training is
                files.append(OUT.run_summary(run))
                continue
            files += run_suite_files(run)
            if "selected" in rules_by_run[run]:
                files.append(OUT.selected_checkpoint(run))
        return files

    return inputs


def mapped_runs_fingerprint(table):
    """A hash of the result files of the other runs the table maps: a parameter, so a changed result reruns it."""

    def fingerprint(wildcards):
        runs = _paper_tables.mapped_runs(_paper_tables.load_table_runs(TABLE_RUNS), table)
        return _paper_tables.run_fingerprint(RUNS_ROOT, [run for run in runs if run not in PAPER_BUILT_RUNS], table)

    return fingerprint


PAPER_TABLE_SHELL = ("{PYTHON} {input.script} --mapping {input.mapping} --reported {input.reported} --runs-root "
                     + RUNS_ROOT + " --out {output.md} > {log} 2>&1")


rule paper_table1:
    input:
        lib=PAPER_TABLES_LIB,
        script=paper_table_script("table1"),
        mapping=TABLE_RUNS,
        reported=paper_table_reported("table1"),
        configured_run=configured_run_inputs("table1"),
    params:
        runs=mapped_runs_fingerprint("table1"),
    output:
        **paper_table_files("table1"),
    log:
        OUT.log("paper_table1"),
    shell:
        PAPER_TABLE_SHELL


rule paper_table2:
    input:
        lib=PAPER_TABLES_LIB,
        script=paper_table_script("table2"),
        mapping=TABLE_RUNS,
        reported=paper_table_reported("table2"),
        configured_run=configured_run_inputs("table2"),
    params:
        runs=mapped_runs_fingerprint("table2"),
    output:
        **paper_table_files("table2"),
    log:
        OUT.log("paper_table2"),
    shell:
        PAPER_TABLE_SHELL


rule paper_table3:
    input:
        lib=PAPER_TABLES_LIB,
        script=paper_table_script("table3"),
        mapping=TABLE_RUNS,
        reported=paper_table_reported("table3"),
        configured_run=configured_run_inputs("table3"),
    params:
        runs=mapped_runs_fingerprint("table3"),
    output:
        **paper_table_files("table3"),
    log:
        OUT.log("paper_table3"),
    shell:
        PAPER_TABLE_SHELL


rule paper_table5:
    input:
        lib=PAPER_TABLES_LIB,
        script=paper_table_script("table5"),
        games=str(RECIPE_DIR / "games.yaml"),
        tool_use=str(RECIPE_DIR / "tool_use.yaml"),
        reported=paper_table_reported("table5"),
    output:
        **paper_table_files("table5"),
    log:
        OUT.log("paper_table5"),
    shell:
        "{PYTHON} {input.script} --games {input.games} --tool-use {input.tool_use} --reported {input.reported} "
        "--out {output.md} > {log} 2>&1"


rule paper_table6:
    input:
        lib=PAPER_TABLES_LIB,
        script=paper_table_script("table6"),
        mapping=TABLE_RUNS,
        reported=paper_table_reported("table6"),
        configured_run=configured_run_inputs("table6"),
    params:
        runs=mapped_runs_fingerprint("table6"),
    output:
        **paper_table_files("table6"),
    log:
        OUT.log("paper_table6"),
    shell:
        PAPER_TABLE_SHELL


rule paper_table7:
    input:
        lib=PAPER_TABLES_LIB,
        script=paper_table_script("table7"),
        mapping=TABLE_RUNS,
        reported=paper_table_reported("table7"),
        configured_run=configured_run_inputs("table7"),
    params:
        runs=mapped_runs_fingerprint("table7"),
    output:
        **paper_table_files("table7"),
    log:
        OUT.log("paper_table7"),
    shell:
        PAPER_TABLE_SHELL


rule paper_table8:
    """SBERT embeddings on the CPU: minutes for thousands of environments; seconds when no run is mapped."""
    input:
        lib=PAPER_TABLES_LIB,
        script=paper_table_script("table8"),
        mapping=TABLE_RUNS,
        reported=paper_table_reported("table8"),
        configured_run=configured_run_inputs("table8"),
    params:
        runs=mapped_runs_fingerprint("table8"),
    output:
        **paper_table_files("table8"),
    log:
        OUT.log("paper_table8"),
    shell:
        PAPER_TABLE_SHELL


rule paper_tables:
    """Every paper table (1, 2, 3, 5, 6, 7, 8) from whatever results exist; missing runs read "not run"."""
    input:
        [path for table in PAPER_TABLE_STEMS for path in paper_table_files(table).values()],
