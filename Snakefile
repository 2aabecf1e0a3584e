# SPADE reproduction workflow. `snakemake` with no flags runs the toy CPU pipeline of configs/default.yaml
# (the workflow profile in profiles/default/ sets the cores). Later stages (training, evaluation, paper)
# extend this DAG through their own rules/<stage>.smk files.

from snakemake.utils import min_version

min_version("9.0")


if not workflow.overwrite_configfiles:  # `--configfile X` replaces the toy config instead of merging over it

    configfile: "configs/default.yaml"


include: "rules/common.smk"
include: "rules/library.smk"
include: "rules/models.smk"
include: "rules/train.smk"
include: "rules/eval.smk"
include: "rules/report.smk"
include: "rules/paper_tables.smk"
include: "rules/paper_figures.smk"
include: "rules/paper_numbers.smk"
include: "rules/paper_pdf.smk"  # after the tables, figures and numbers: it lists their outputs


rule all:
    input:
        library_outputs(),
        run_outputs(),
    default_target: True


onsuccess:
    print(f"\nResults of run '{SPADE.run_name}':")
    for path in run_outputs():
        print(f"  {path}")
