# Paper tables 1, 2, 3, 5, 6, 7 and 8, each by its own script, with the paper's reported values beside ours.
# `snakemake paper_tables` writes <results_dir>/paper/tables/<table>.md, <table>.tex and
# <table>.md.provenance.json (inputs with SHA-256, and one record per cell of ours).
#
# Declared inputs: the script (the table's own logic), the shared spade.paper modules it imports, directly or through
# another of them (paper_script_lib: e.g. src/spade/paper/tables.py, table_runs.py, benchmark_tables.py), the run mapping
# (paper/table_runs.yaml), the reported CSV (paper/reported/) and, for Table 5, the two recipe files. Editing a
# script or a reported CSV reruns that table only; editing a shared module or the mapping reruns those using it.
# The results of the runs a table maps are read, not declared, except those of the configured runs: see
# rules/paper_common.smk, which also holds the paths and functions used here.

PAPER_TABLE_SHELL = (
    "{params.python} {input.script} --mapping {input.mapping} --reported {input.reported} "
    "--runs-root {params.runs_root} --out {output.md} > {log} 2>&1"
)


rule paper_table1:
    input:
        lib=paper_script_lib(paper_table_script("table1")),
        script=paper_table_script("table1"),
        mapping=TABLE_RUNS,
        reported=paper_table_reported("table1"),
        configured_run=configured_run_inputs("table1"),
    output:
        **reported_files(
            paper_table_files("table1"), "paper_table", paper_table_category("table1"), PAPER_TABLE_TITLES["table1"]
        ),
    log:
        OUT.log("paper_table1"),
    conda:
        CPU_ENV
    params:
        runs=mapped_runs_fingerprint("table1"),
        runs_root=RUNS_ROOT,
        python=CPU_PYTHON,
    shell:
        PAPER_TABLE_SHELL


rule paper_table2:
    input:
        lib=paper_script_lib(paper_table_script("table2")),
        script=paper_table_script("table2"),
        mapping=TABLE_RUNS,
        reported=paper_table_reported("table2"),
        configured_run=configured_run_inputs("table2"),
    output:
        **reported_files(
            paper_table_files("table2"), "paper_table", paper_table_category("table2"), PAPER_TABLE_TITLES["table2"]
        ),
    log:
        OUT.log("paper_table2"),
    conda:
        CPU_ENV
    params:
        runs=mapped_runs_fingerprint("table2"),
        runs_root=RUNS_ROOT,
        python=CPU_PYTHON,
    shell:
        PAPER_TABLE_SHELL


rule paper_table3:
    input:
        lib=paper_script_lib(paper_table_script("table3")),
        script=paper_table_script("table3"),
        mapping=TABLE_RUNS,
        reported=paper_table_reported("table3"),
        configured_run=configured_run_inputs("table3"),
    output:
        **reported_files(
            paper_table_files("table3"), "paper_table", paper_table_category("table3"), PAPER_TABLE_TITLES["table3"]
        ),
    log:
        OUT.log("paper_table3"),
    conda:
        CPU_ENV
    params:
        runs=mapped_runs_fingerprint("table3"),
        runs_root=RUNS_ROOT,
        python=CPU_PYTHON,
    shell:
        PAPER_TABLE_SHELL


rule paper_table5:
    input:
        lib=paper_script_lib(paper_table_script("table5")),
        script=paper_table_script("table5"),
        games=str(RECIPE_DIR / "games.yaml"),
        tool_use=str(RECIPE_DIR / "tool_use.yaml"),
        reported=paper_table_reported("table5"),
    output:
        **reported_files(
            paper_table_files("table5"), "paper_table", paper_table_category("table5"), PAPER_TABLE_TITLES["table5"]
        ),
    log:
        OUT.log("paper_table5"),
    conda:
        CPU_ENV
    params:
        python=CPU_PYTHON,
    shell:
        "{params.python} {input.script} --games {input.games} --tool-use {input.tool_use} --reported {input.reported} "
        "--out {output.md} > {log} 2>&1"


rule paper_table6:
    input:
        lib=paper_script_lib(paper_table_script("table6")),
        script=paper_table_script("table6"),
        mapping=TABLE_RUNS,
        reported=paper_table_reported("table6"),
        configured_run=configured_run_inputs("table6"),
    output:
        **reported_files(
            paper_table_files("table6"), "paper_table", paper_table_category("table6"), PAPER_TABLE_TITLES["table6"]
        ),
    log:
        OUT.log("paper_table6"),
    conda:
        CPU_ENV
    params:
        runs=mapped_runs_fingerprint("table6"),
        runs_root=RUNS_ROOT,
        python=CPU_PYTHON,
    shell:
        PAPER_TABLE_SHELL


rule paper_table7:
    input:
        lib=paper_script_lib(paper_table_script("table7")),
        script=paper_table_script("table7"),
        mapping=TABLE_RUNS,
        reported=paper_table_reported("table7"),
        configured_run=configured_run_inputs("table7"),
    output:
        **reported_files(
            paper_table_files("table7"), "paper_table", paper_table_category("table7"), PAPER_TABLE_TITLES["table7"]
        ),
    log:
        OUT.log("paper_table7"),
    conda:
        CPU_ENV
    params:
        runs=mapped_runs_fingerprint("table7"),
        runs_root=RUNS_ROOT,
        python=CPU_PYTHON,
    shell:
        PAPER_TABLE_SHELL


rule paper_table8:
    """SBERT embeddings on the CPU: minutes for thousands of environments; seconds when no run is mapped."""
    input:
        lib=paper_script_lib(paper_table_script("table8")),
        script=paper_table_script("table8"),
        mapping=TABLE_RUNS,
        reported=paper_table_reported("table8"),
        configured_run=configured_run_inputs("table8"),
    output:
        **reported_files(
            paper_table_files("table8"), "paper_table", paper_table_category("table8"), PAPER_TABLE_TITLES["table8"]
        ),
    log:
        OUT.log("paper_table8"),
    conda:
        CPU_ENV
    params:
        runs=mapped_runs_fingerprint("table8"),
        runs_root=RUNS_ROOT,
        python=CPU_PYTHON,
    shell:
        PAPER_TABLE_SHELL


rule paper_tables:
    """Every paper table (1, 2, 3, 5, 6, 7, 8) from whatever results exist; missing runs read "not run"."""
    input:
        [path for table in PAPER_TABLE_STEMS for path in paper_table_files(table).values()],
