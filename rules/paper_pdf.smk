# The paper PDF and the target `paper` (every table, figure and quoted number, and the PDF when LaTeX is there).
# Include after rules/paper_tables.smk, rules/paper_figures.smk and rules/paper_numbers.smk.
#
# `snakemake paper_pdf` compiles paper/main.tex with the engine of the config key paper.latex_engine (latexmk |
# pdflatex | tectonic) in the scratch folder <results_dir>/paper/build/ (paper/scripts/build_pdf.py copies main.tex
# and the generated tables/, figures/ and numbers/ there, the path scheme of main.tex) and moves the PDF to
# <results_dir>/paper/main.pdf. Without the engine on PATH the rule fails and says how to get one.
# `snakemake paper` builds every artifact; it asks for the PDF only when the engine is found when the workflow is
# parsed, and otherwise prints one line saying the PDF is skipped.


rule paper_pdf:
    """paper/main.tex with every generated table, figure and number, compiled by paper.latex_engine."""
    input:
        script=script("build_pdf.py"),
        tex=PAPER_MAIN_TEX,
        generated=paper_pdf_inputs(),
    output:
        pdf=reported(PAPER_PDF, "paper_pdf", "Paper text", "the paper (PDF)"),
    log:
        OUT.log("paper_pdf"),
    benchmark:
        OUT.benchmark("paper_pdf")
    conda:
        CPU_ENV
    params:
        engine=PAPER_LATEX_ENGINE,
        build_dir=f"{PAPER_DIR}/build",
        paper_dir=lambda wildcards, output: os.path.dirname(output.pdf),
        python=CPU_PYTHON,
    shell:
        "{params.python} {input.script} --engine {params.engine} --tex {input.tex} --paper-dir {params.paper_dir}"
        " --build-dir {params.build_dir} --out {output.pdf} --inputs {input.generated} > {log} 2>&1"


if not PAPER_ENGINE_FOUND:
    print(
        f"paper: the PDF ({PAPER_PDF}) is skipped: LaTeX engine '{PAPER_LATEX_ENGINE}' (config key "
        "paper.latex_engine) is not on PATH; install one (Debian: apt-get install latexmk "
        "texlive-latex-recommended texlive-latex-extra; or tectonic) to get it.",
        file=sys.stderr,
    )


rule paper:
    """Every paper table, figure and quoted number, the environment-source comparison (ours), from whatever results
    exist, and the PDF when LaTeX is found."""
    input:
        rules.paper_tables.input,
        rules.paper_figures.input,
        rules.paper_numbers.input,
        rules.paper_comparison.input,
        [PAPER_PDF] if PAPER_ENGINE_FOUND else [],
