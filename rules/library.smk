# The built-in environment library: validate every environment, replay its solution (oracle) and a
# random policy through the sandbox, and write a machine-readable and a human-readable report.


rule library_check:
    output:
        json=OUT.library_check_json,
        markdown=reported(OUT.library_report_md, "library_report", "Run", "environment library"),
    log:
        OUT.log("library_check"),
    benchmark:
        OUT.benchmark("library_check")
    conda:
        CPU_ENV
    params:
        config=config_hash("sandbox", "validation", "library_check"),
        config_file=workflow_config_file,
        python=CPU_PYTHON,
    shell:
        "{params.python} -m spade.cli env check-library --config {params.config_file} "
        "--out {output.json} --markdown {output.markdown} > {log} 2>&1"


rule sandbox_bench:
    output:
        OUT.sandbox_bench_json,
    log:
        OUT.log("sandbox_bench"),
    conda:
        CPU_ENV
    params:
        config=config_hash("sandbox"),
        config_file=workflow_config_file,
        python=CPU_PYTHON,
    shell:
        "{params.python} -m spade.cli env bench --config {params.config_file} --json --out {output} > {log} 2>&1"
