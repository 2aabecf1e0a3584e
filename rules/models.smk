# Model and corpus preparation: a local Hugging Face folder per model card, the offline corpus.


rule prepare_model:
    params:
        config=config_hash("model"),
    output:
        directory(OUT.model_dir("{card}")),
    log:
        OUT.log("prepare_model_{card}"),
    benchmark:
        OUT.benchmark("prepare_model_{card}")
    shell:
        "{PYTHON} -m spade.cli model prepare --config-json {CONFIG_JSON} --out {output} > {log} 2>&1"


rule build_corpus:
    params:
        config=config_hash("corpus", "selfplay.flavour", "seed"),
    output:
        OUT.corpus("{kind}"),
    log:
        OUT.log("build_corpus_{kind}"),
    benchmark:
        OUT.benchmark("build_corpus_{kind}")
    shell:
        "{PYTHON} -m spade.cli corpus build --config-json {CONFIG_JSON} --out {output} > {log} 2>&1"
