# Model and corpus preparation: a local Hugging Face folder per model card, the offline corpus. Runs share them:
# each model folder and corpus is built from the config of a run that uses it (the runs using one must agree on
# what it is built from; common.smk checks that at parse time). A model folder always comes from the config of a run
# of its own card (the toy's learning check uses another card), a corpus from that of a run of its flavour.


rule prepare_model:
    input:
        card_warmup_files,
    output:
        directory(OUT.model_dir("{card}")),
    log:
        OUT.log("prepare_model_{card}"),
    benchmark:
        OUT.benchmark("prepare_model_{card}")
    wildcard_constraints:
        card=_regex(MODEL_CARDS),
    conda:
        CPU_ENV
    params:
        config=card_config_hash,
        config_file=card_config_file,
        python=CPU_PYTHON,
    shell:
        "{params.python} -m spade.cli model prepare --config {params.config_file} --out {output} > {log} 2>&1"


rule build_corpus:
    output:
        OUT.corpus("{kind}"),
    log:
        OUT.log("build_corpus_{kind}"),
    benchmark:
        OUT.benchmark("build_corpus_{kind}")
    wildcard_constraints:
        kind=_regex(CORPUS_KINDS),
    conda:
        CPU_ENV
    params:
        config=corpus_config_hash,
        config_file=corpus_config_file,
        python=CPU_PYTHON,
    shell:
        "{params.python} -m spade.cli corpus build --config {params.config_file} --out {output} > {log} 2>&1"
