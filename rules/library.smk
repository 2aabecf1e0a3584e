# The built-in environment library: validate every environment, replay its solution (oracle) and a
# random policy through the sandbox, and write a machine-readable and a human-readable report.


rule library_check:
    params:
        config=config_hash("sandbox", "validation", "library_check"),
    output:
        json=OUT.library_check_json,
        markdown=OUT.library_report_md,
    log:
        OUT.log("library_check"),
    benchmark:
        OUT.benchmark("library_check")
    shell:
        "{PYTHON} -m spade.cli env check-library --config-json {CONFIG_JSON} "
        "--out {output.json} --markdown {output.markdown} > {log} 2>&1"


rule sandbox_bench:
    params:
        config=config_hash("sandbox"),
    output:
        OUT.sandbox_bench_json,
    log:
        OUT.log("sandbox_bench"),
    shell:
        "{PYTHON} -m spade.cli env bench --config-json {CONFIG_JSON} --json --out {output} > {log} 2>&1"
