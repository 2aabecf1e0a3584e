# Shared helpers: config validation at parse time, the interpreter and the output paths.

import hashlib
import json
import shlex
import sys
from dataclasses import asdict
from pathlib import Path

from snakemake.exceptions import WorkflowError

from spade import paths
from spade.config import ConfigError, SpadeConfig, resolve_layers
from spade.configtools import from_dict
from spade.evals import registry

try:  # recipe < model card < run file and --config overrides; fail before any job runs, naming the key
    SPADE = from_dict(SpadeConfig, resolve_layers(config))
except ConfigError as exc:
    raise WorkflowError(f"invalid configuration: {exc}")

PYTHON = shlex.quote(sys.executable)  # the interpreter snakemake runs in (the project's venv)
SCRIPT_DIR = Path(workflow.basedir) / "paper" / "scripts"  # works with --directory elsewhere


def script(name):
    """A paper script, declared as an input so that editing it reruns its rule (and only its rule)."""
    return str(SCRIPT_DIR / name)


def repo_path(path):
    """A path from the config, relative to the repository root unless absolute (works with --directory)."""
    return str(Path(workflow.basedir) / path)


def config_hash(*keys):
    """Hash of the named (dotted) config sections: a rule's `params`, so that changing a key it reads reruns it.

    Every rule gets the whole config as JSON, but Snakemake does not see what the JSON holds; this
    parameter is what its `params` rerun trigger compares.
    """
    settings = asdict(SPADE)
    picked = {}
    for key in keys:
        value = settings
        for part in key.split("."):
            value = value[part]
        picked[key] = value
    return hashlib.sha256(json.dumps(picked, sort_keys=True, default=str).encode()).hexdigest()[:16]


EVAL_SHARED = ["eval.seed", "eval.temperature", "eval.top_p", "eval.max_new_tokens", "eval.max_context_tokens",
               "eval.max_items", "model", "sandbox"]  # what every evaluation's results depend on


def eval_config_hash(wildcards):
    return config_hash(*EVAL_SHARED, f"eval.{wildcards.benchmark}")


BENCHMARKS = sorted(registry())  # every registered benchmark name (the `benchmark` wildcard)
CONFIG_JSON = shlex.quote(json.dumps(config, sort_keys=True))  # the merged config, overrides included
OUT = paths.ResultPaths(SPADE.results_dir)


def library_outputs():
    return [OUT.library_check_json, OUT.library_report_md]


def corpus_input(wildcards):
    """The offline corpus the pipeline builds, unless the run points at its own (or disables grounding)."""
    if SPADE.corpus.path or not SPADE.corpus.enabled:
        return []
    return OUT.corpus("tool_use" if SPADE.selfplay.flavour == "tool_use" else "games")


def checkpoint_input(wildcards):
    """Step 0 needs the base model; later steps need the finished run (its checkpoints then exist)."""
    if int(wildcards.step) == 0:
        return OUT.model_dir(SPADE.model.name)
    return OUT.run_summary(wildcards.run)


def checkpoint_folder(wildcards):
    if int(wildcards.step) == 0:
        return OUT.model_dir(SPADE.model.name)
    return OUT.checkpoint(wildcards.run, wildcards.step)


def eval_steps():
    return [0] + SPADE.selfplay.checkpoint_steps()


def eval_files(wildcards=None):
    """Every checkpoint (step 0 = base) on every `eval.during_training` benchmark: the curves."""
    return [OUT.eval_file(SPADE.run_name, step, name) for name in SPADE.eval.during_training for step in eval_steps()]


def selection_files(wildcards):
    """The results `eval.select_by` reads: its benchmarks at every checkpoint of the run (not the base model)."""
    names = sorted({selector.partition(":")[0] for selector in SPADE.eval.select_by})
    return [OUT.eval_file(wildcards.run, step, name) for name in names for step in SPADE.selfplay.checkpoint_steps()]


def suite_files(wildcards=None):
    """`eval.final` benchmarks on the base model and the final checkpoint, plus the training-time curves."""
    final = [0, SPADE.selfplay.checkpoint_steps()[-1]]
    extra = [OUT.eval_file(SPADE.run_name, step, name) for name in SPADE.eval.final for step in final]
    return list(dict.fromkeys(eval_files() + extra))


def run_outputs():
    return [OUT.results_table, OUT.run_table(SPADE.run_name), OUT.training_figure(SPADE.run_name)]
