# Model and corpus preparation: a local Hugging Face folder per model card, the offline corpus. Runs share them:
# each model folder and corpus is built from the config of a run that uses it (the runs using one must agree on
# what it is built from; common.smk checks that at parse time). A model folder always comes from the config of a run
# of its own card: with several runs (the toy's learning check uses another card) each card has its own JSON.


def card_config_hash(wildcards):
    return _settings_hash(asdict(MODEL_CARDS[wildcards.card][0]), ["model"])


def corpus_config_hash(wildcards):
    return _settings_hash(asdict(CORPUS_KINDS[wildcards.kind][0]), ["corpus", "selfplay.flavour", "seed"])


rule prepare_model:
    params:
        config=card_config_hash,
        **({"config_json": lambda wildcards: MODEL_CARDS[wildcards.card][1]} if PER_RUN_JSON else {}),
    output:
        directory(OUT.model_dir("{card}")),
    log:
        OUT.log("prepare_model_{card}"),
    benchmark:
        OUT.benchmark("prepare_model_{card}")
    wildcard_constraints:
        card=_regex(MODEL_CARDS),
    shell:
        "{PYTHON} -m spade.cli model prepare --config-json " + CONFIG_ARG + " --out {output} > {log} 2>&1"


# each corpus from the config of a run that reads it: with corpora of two flavours (the toy and the tool-use toy, a
# multi-run config) every kind gets its own run's JSON
CORPUS_PER_KIND = MULTI_RUN or len(CORPUS_KINDS) > 1


rule build_corpus:
    params:
        config=corpus_config_hash,
        **({"config_json": lambda wildcards: CORPUS_KINDS[wildcards.kind][1]} if CORPUS_PER_KIND else {}),
    output:
        OUT.corpus("{kind}"),
    log:
        OUT.log("build_corpus_{kind}"),
    benchmark:
        OUT.benchmark("build_corpus_{kind}")
    wildcard_constraints:
        kind=_regex(CORPUS_KINDS),
    shell:
        "{PYTHON} -m spade.cli corpus build --config-json "
        + ("{params.config_json}" if CORPUS_PER_KIND else "{CONFIG_JSON}")
        + " --out {output} > {log} 2>&1"
