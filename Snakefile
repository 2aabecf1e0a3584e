# SPADE reproduction workflow. `snakemake` with no flags runs the toy CPU pipeline of configs/default.yaml
# (the workflow profile in profiles/default/ sets the cores). `snakemake --profile slurm all` runs the whole paper
# (configs/paper.yaml: every run, on a SLURM cluster; the profile is profiles/slurm/, linked as ./slurm).
# Later stages (training, evaluation, paper) extend this DAG through their own rules/<stage>.smk files.

from snakemake.utils import min_version

min_version("9.0")


report: "paper/captions/workflow.rst"  # the report's front page (`snakemake --report results/report.html`)


if not workflow.overwrite_configfiles:  # `--configfile X` replaces the toy config instead of merging over it

    configfile: "configs/default.yaml"


include: "rules/common.smk"
include: "rules/paper_common.smk"  # settings and functions of the paper artifacts and the toy targets
include: "rules/report_common.smk"  # what registers the tables and figures for `snakemake --report`
include: "rules/library.smk"
include: "rules/models.smk"
include: "rules/train.smk"
include: "rules/eval.smk"
include: "rules/report.smk"
include: "rules/env_cards.smk"
include: "rules/paper_tables.smk"
include: "rules/paper_figures.smk"
include: "rules/paper_numbers.smk"
include: "rules/paper_comparison.smk"
include: "rules/paper_pdf.smk"  # after the tables, figures, numbers and comparison: it lists their outputs
include: "rules/toy_ablations.smk"
include: "rules/toy_tool_use.smk"
include: "rules/integration.smk"
include: "rules/preflight.smk"
include: "rules/rehearsal.smk"


onstart:
    # under `--executor slurm`: stop before the first sbatch when the plugin's status queries cannot work (a cluster
    # without accounting would otherwise hang forever; spade.cluster.status)
    from spade.cluster.status import check_status_queries

    check_status_queries(workflow)


rule all:
    """The configured runs (the toy run by default) and the library check; for a multi-run config (configs/paper.yaml)
    also every run's suite and selected checkpoint, the pending runs (which fail, saying what they need) and the paper
    target."""
    default_target: True
    input:
        library_outputs(),
        run_outputs(),
        paper_run_outputs() if MULTI_RUN else [],
        rules.paper.input if MULTI_RUN else [],
        OUT.rehearsal_table if REHEARSAL else [],


rule report_contents:
    """Every registered table and figure that exists now (rules/report_common.smk): the default target of
    `snakemake --report FILE` when it names no target, so that the report shows what the runs produced so far."""
    default_target: REPORT_ALONE
    input:
        report_contents,


if REPORT_ASKED:  # what the captions (paper/captions/*.rst) say about runs, config files and scale

    config[REPORT_KEY] = report_facts()


onsuccess:
    print(f"\nResults of run{'s' if len(MAIN_RUNS) > 1 else ''} {', '.join(repr(run) for run in MAIN_RUNS)}:")
    for path in run_outputs():
        print(f"  {path}")
