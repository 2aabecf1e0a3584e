# Shared helpers: config validation at parse time, the interpreter, the output paths and the configured runs.
#
# A workflow config is one of two kinds:
#   single-run  a run config (configs/default.yaml, configs/paper/<run>.yaml): the run is the config itself.
#   multi-run   a config with the key `runs` (configs/paper.yaml): a list of run files, each a whole run config
#               (recipe < model card < file), trained and evaluated side by side in one invocation; the key
#               `pending` names runs our code cannot train yet (each gets a rule that fails at once, saying why).
#               The other top-level keys configure the workflow-wide rules (results_dir, paper.*, the library
#               check); `results_dir` also replaces every run file's, so that all runs share one results folder.
# A single-run config may also have the key `toy_ablations` (configs/default.yaml): run name -> settings laid over
# the run's own (a mapping, or the path of a YAML file holding one), one extra run per entry (the ablations and
# baselines at toy scale). They are trained and evaluated only for the target `toy_ablations` and the paper artifacts
# that map them, never for the default target. The key `toy_tool_use` works the same way for the tool-use toy
# (configs/toy_tool_use.yaml; target `toy_tool_use`), and the key `learning_check` for the learning check (target
# `learning_check`, results/tables/learning_check.md; in the default target until issue 48). The key
# `mechanism_check` adds runs the default target trains and evaluates on their own held-out benchmark only
# (mechanism_check_heldout): the mechanism check reads their training records and those results
# (results/tables/mechanism_check.md, issues 39 and 48).
# RUNS maps each configured run's name to its typed config; every run-level rule (train, evaluate,
# select_checkpoint, ...) reads its run's own config through the `run` wildcard. MAIN_RUNS are the runs of the
# default target (`all`), the results and suite tables and `eval_toy`: every run of a multi-run config, the run
# itself of a single-run config.

import hashlib
import json
import os
import re
import shlex
import shutil
import sys
from dataclasses import asdict
from pathlib import Path

import yaml
from snakemake.exceptions import WorkflowError
from snakemake_interface_executor_plugins.settings import DeploymentMethod

from spade import paths
from spade.config import ConfigError, SpadeConfig, load_config, resolve_layers
from spade.configtools import deep_merge, from_dict, load_yaml, retype_workflow_overrides
from spade.evals.registry import registry
from spade.io import atomic_write_text
from spade.rlhf.config import resolve_openrlhf

# `--config 'selfplay={total_steps: 2}'`: Snakemake reads such a mapping's scalars as strings; read them as a file would
retype_workflow_overrides(config, workflow.config_settings.overwrite_config or {})
# workflow keys that are not run settings
WORKFLOW_KEYS = ("runs", "pending", "toy_ablations", "toy_tool_use", "learning_check", "mechanism_check", "rehearsal")
MULTI_RUN = "runs" in config
REHEARSAL = "rehearsal" in config  # configs/rehearsal.yaml: the paper runs on this CPU (rules/rehearsal.smk)
WORKFLOW_CONFIG = {key: value for key, value in config.items() if key not in WORKFLOW_KEYS}

try:  # recipe < model card < run file and --config overrides; fail before any job runs, naming the key
    SPADE = from_dict(SpadeConfig, resolve_layers(WORKFLOW_CONFIG))
except ConfigError as exc:
    raise WorkflowError(f"invalid configuration: {exc}")


class Untracked:
    """A `params` value that Snakemake's params trigger does not record: it compares only the values it can represent
    (strings, numbers, containers), and this is none of them. For what a job's command needs but its results do not
    depend on: the interpreter, the image flags, the path of a job config file (whose name changes with any key of the
    run; the `config` hash param holds the keys the rule reads). The shell command gets the text."""

    def __init__(self, text):
        self.text = str(text)

    def __str__(self):
        return self.text

    def __repr__(self):
        return f"Untracked({self.text!r})"


# The interpreter of the jobs (the param `python` of every rule): without a deployment method, the venv snakemake runs
# in. Under --software-deployment-method conda every rule runs in the environment it declares (the CPU rules
# envs/spade-cpu.yaml, the GPU rules envs/spade-gpu.yaml) and calls its `python`; under apptainer the rules that
# declare a container (evaluate, designer_fidelity) call the image's, and the others stay on the host, in this venv
# (docs/CONTAINERS.md)
DEPLOYMENT = set(workflow.deployment_settings.deployment_method)
DEPLOYED = bool(DEPLOYMENT & {DeploymentMethod.CONDA, DeploymentMethod.APPTAINER})
IN_APPTAINER = DeploymentMethod.APPTAINER in DEPLOYMENT
IN_CONDA = DeploymentMethod.CONDA in DEPLOYMENT
VENV_PYTHON = shlex.quote(sys.executable)
CPU_PYTHON = Untracked("python" if IN_CONDA else VENV_PYTHON)
GPU_PYTHON = Untracked("python" if DEPLOYED else VENV_PYTHON)
GPU_IMAGE = os.environ.get("SPADE_GPU_IMAGE", "containers/spade-gpu.sif")  # containers/Apptainer.def, built once
# `train` declares no container: under apptainer its job runs on the host (this venv, or the conda environment
# under conda), so that the launch script can call srun and scontrol, and every Ray process enters the image
# itself (spade train --image, docs/CONTAINERS.md "Training, across nodes")
TRAIN_PYTHON = Untracked("python" if IN_CONDA else VENV_PYTHON)
APPTAINER_ARGS = workflow.deployment_settings.apptainer_args or "--nv"


# The cluster profile turns apptainer on; Snakemake refuses even to plan without the apptainer binary. A dry run
# here (a laptop, a CI machine) plans the GPU jobs without their container and says so; a real run stops.
def _dry_run():
    """-n/--dry-run: Snakemake picks its dry-run executor only after parsing the workflow, so read the command line."""
    if workflow.dryrun:
        return True
    flags = [arg for arg in sys.argv[1:] if arg.startswith("-")]
    return any(arg in ("--dry-run", "--dryrun") or (not arg.startswith("--") and "n" in arg[1:]) for arg in flags)


GPU_CONTAINER = GPU_IMAGE
if IN_APPTAINER and not (shutil.which("apptainer") or shutil.which("singularity")):
    if not _dry_run():
        raise WorkflowError(
            "--software-deployment-method apptainer (profiles/slurm/config.yaml) needs the apptainer "
            "command on PATH (e.g. `module load apptainer`); without a container use "
            "--software-deployment-method conda, or none for the CPU venv (docs/CONTAINERS.md)"
        )
    print(
        "note: apptainer is not installed here: this dry run plans the GPU jobs without their container "
        f"({GPU_IMAGE}); a real run needs it",
        file=sys.stderr,
    )
    GPU_CONTAINER = None
CPU_ENV = "../envs/spade-cpu.yaml"  # relative to rules/
GPU_ENV = "../envs/spade-gpu.yaml"
SCRIPT_DIR = Path(workflow.basedir) / "paper" / "scripts"  # works with --directory elsewhere


def script(name):
    """A paper script, declared as an input so that editing it reruns its rule (and only its rule)."""
    return str(SCRIPT_DIR / name)


def repo_path(path):
    """A path from the config, relative to the repository root unless absolute (works with --directory)."""
    return str(Path(workflow.basedir) / path)


def _overlay_settings(key, name, overlay):
    """An entry's settings: the mapping itself, or the mapping in the YAML file it names (from the repository root)."""
    if not isinstance(overlay, str):
        return overlay
    try:
        return load_yaml(repo_path(overlay))
    except ConfigError as exc:
        raise WorkflowError(f"invalid configuration: config key '{key}.{name}' names the file {overlay!r}: {exc}")


def _rehearsal_layers(rehearsal):
    """The key `rehearsal` of a multi-run config (configs/rehearsal.yaml) -> (overlay settings, {recipe: its extra
    overlay}, {run name: its own overlay}, {model card: tiny card settings}); (None, {}, {}, {}) when absent. The
    overlay is laid over every run file, then the run's recipe's entry of `rehearsal.recipes`, then the run's own entry
    of `rehearsal.runs` (the settings a user would make: endpoints, checkouts); a run whose model_card is a key of
    `rehearsal.models` gets that card's settings as its model section (docs/OPENRLHF.md, "The rehearsal")."""
    if rehearsal is None:
        return None, {}, {}, {}
    allowed = {"overlay", "recipes", "runs", "models"}
    if not isinstance(rehearsal, dict) or set(rehearsal) - allowed or not isinstance(rehearsal.get("overlay"), str):
        raise WorkflowError(
            "invalid configuration: config key 'rehearsal' must be a mapping with 'overlay' (a YAML file laid over "
            "every run file), 'recipes' (recipe -> a YAML file laid over it next), 'runs' (run name -> a YAML file "
            f"laid over it last) and 'models' (model card -> tiny model card file), got {rehearsal!r:.200}"
        )
    layers = {}
    for key in ("recipes", "runs", "models"):
        entries = rehearsal.get(key) or {}
        if not isinstance(entries, dict):
            raise WorkflowError(
                f"invalid configuration: config key 'rehearsal.{key}' must be a mapping, got {entries!r}"
            )
        layers[key] = {name: _overlay_settings(f"rehearsal.{key}", name, path) for name, path in entries.items()}
    overlay = _rooted(_overlay_settings("rehearsal", "overlay", rehearsal["overlay"]))
    named = [(f"{key}.{name}", v) for key in ("recipes", "runs") for name, v in layers[key].items()]
    for label, settings in [("overlay", overlay)] + named:
        if not isinstance(settings, dict) or {"run_name", "model", "model_card", "recipe"} & set(settings):
            raise WorkflowError(
                f"invalid configuration: config key 'rehearsal.{label}' must name a YAML mapping without run_name, "
                f"recipe, model_card and model (the models come from 'rehearsal.models'), got {settings!r:.200}"
            )
    cards = {card: {"hf_id": "", **settings} for card, settings in layers["models"].items()}
    return overlay, layers["recipes"], {name: _rooted(v) for name, v in layers["runs"].items()}, cards


def _rooted(settings):
    """Rehearsal settings with their data and checkout paths (baseline.rlve_path, sandbox.read_only_paths, the
    evaluation data files) made absolute from the repository root, as a user's absolute paths would be: the sandbox
    needs absolute ones, and a job may run in another folder (--directory)."""
    if not isinstance(settings, dict):
        return settings  # the caller names the bad value
    settings = json.loads(json.dumps(settings))

    def root(section, key):
        value = section.get(key) if isinstance(section, dict) else None
        if isinstance(value, str) and value:
            section[key] = repo_path(value)
        elif isinstance(value, list):
            section[key] = [repo_path(v) if isinstance(v, str) else v for v in value]
        elif isinstance(value, dict):
            section[key] = {k: repo_path(v) if isinstance(v, str) else v for k, v in value.items()}

    evals = settings.get("eval") or {}
    for section, key in (
        (settings.get("baseline"), "rlve_path"),
        (settings.get("sandbox"), "read_only_paths"),
        (evals.get("aime"), "paths"),
        (evals.get("gpqa_diamond"), "path"),
        (evals.get("livecodebench"), "path"),
    ):
        root(section, key)
    return settings


def _load_runs(entries, results_dir, rehearsal=None):
    """The run files a multi-run config lists -> ({name: SpadeConfig}, {name: the run's settings as a plain dict});
    with `rehearsal` (the config key) each run file gets the rehearsal's overlay and tiny model."""
    if not isinstance(entries, list) or not entries or not all(isinstance(e, str) and e for e in entries):
        raise WorkflowError(
            f"invalid configuration: config key 'runs' must be a non-empty list of run files "
            f"(paths from the repository root, e.g. configs/paper/spade_games_4b.yaml), got {entries!r}"
        )
    overlay, by_recipe, by_run, tiny_cards = _rehearsal_layers(rehearsal)
    typed, raw, files = {}, {}, {}
    for entry in entries:
        try:
            data = deep_merge(load_yaml(repo_path(entry)), {"results_dir": results_dir})
            if overlay is not None:
                card = data.get("model_card", "smollm2-135m")
                if card not in tiny_cards:
                    raise ConfigError(
                        f"model_card {card!r} has no tiny model in config key 'rehearsal.models' (known: "
                        f"{sorted(tiny_cards)})"
                    )
                data = deep_merge(deep_merge(data, overlay), by_recipe.get(data.get("recipe", "games"), {}))
                data = deep_merge(deep_merge(data, by_run.get(data.get("run_name"), {})), {"model": tiny_cards[card]})
            run = from_dict(SpadeConfig, resolve_layers(data))
        except ConfigError as exc:
            raise WorkflowError(f"invalid configuration: run file {entry!r} (config key 'runs'): {exc}")
        if run.run_name in typed:
            raise WorkflowError(
                f"invalid configuration: config key 'runs' lists two files with run_name "
                f"{run.run_name!r}: {files[run.run_name]!r} and {entry!r}; run names must be unique"
            )
        typed[run.run_name], raw[run.run_name], files[run.run_name] = run, data, entry
    if set(by_run) - set(typed):
        raise WorkflowError(
            f"invalid configuration: config key 'rehearsal.runs' names {sorted(set(by_run) - set(typed))}, which no "
            f"run file of 'runs' is; known: {sorted(typed)}"
        )
    return typed, raw


def _load_pending(pending, runs):
    """run name -> why it cannot be trained yet (what is missing), from the config key `pending`."""
    if pending is None:
        return {}
    if not isinstance(pending, dict):
        raise WorkflowError(
            f"invalid configuration: config key 'pending' must map run names to the reason each "
            f"cannot run yet, got {pending!r}"
        )
    for name, reason in pending.items():
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            raise WorkflowError(
                f"invalid configuration: config key 'pending' has run name {name!r}; allowed: "
                "letters, digits, '_', '.', '-'"
            )
        if not isinstance(reason, str) or not reason.strip():
            raise WorkflowError(
                f"invalid configuration: config key 'pending.{name}' must say what is missing "
                f"(a non-empty text), got {reason!r}"
            )
        if name in runs:
            raise WorkflowError(
                f"invalid configuration: run {name!r} is both configured (config key 'runs') and "
                "pending (config key 'pending'); remove it from one of them"
            )
    return {name: " ".join(reason.split()) for name, reason in pending.items()}


if MULTI_RUN:
    RUNS, _RUN_DATA = _load_runs(config["runs"], SPADE.results_dir, config.get("rehearsal"))
    PENDING = _load_pending(config.get("pending"), RUNS)
else:
    if "rehearsal" in config:
        raise WorkflowError(
            "invalid configuration: config key 'rehearsal' needs a multi-run config (configs/rehearsal.yaml)"
        )
    if "pending" in config:
        raise WorkflowError(
            "invalid configuration: config key 'pending' needs a multi-run config (one with the "
            "key 'runs', e.g. configs/paper.yaml)"
        )
    RUNS, _RUN_DATA = {SPADE.run_name: SPADE}, {SPADE.run_name: WORKFLOW_CONFIG}
    PENDING = {}


def _load_overlay_runs(key, entries, base):
    """The extra runs of config key `key` (`toy_ablations`, `toy_tool_use`, `learning_check`) -> ({name: SpadeConfig},
    {name: settings}); each entry's settings (a mapping, or a YAML file holding one) are laid over `base` (the single
    run's own settings) with `run_name` set to the entry's name."""
    if not isinstance(entries, dict) or not entries:
        raise WorkflowError(
            f"invalid configuration: config key '{key}' must map run names to the settings "
            f"each changes (e.g. toy_no_memory: {{memory: {{enabled: false}}}}), got {entries!r:.200}"
        )
    typed, raw = {}, {}
    for name, overlay in entries.items():
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", name) or name in RUNS:
            raise WorkflowError(
                f"invalid configuration: config key '{key}' has run name {name!r}; allowed: "
                f"letters, digits, '_', '.', '-', and not the main run's name {SPADE.run_name!r}"
            )
        overlay = _overlay_settings(key, name, overlay)
        if not isinstance(overlay, dict) or "run_name" in overlay or "results_dir" in overlay:
            raise WorkflowError(
                f"invalid configuration: config key '{key}.{name}' must be a mapping of the "
                "settings the run changes, or the path of a YAML file holding one (without run_name, "
                "which is the entry's name, and results_dir, which all runs share), got "
                f"{overlay!r:.200}"
            )
        data = deep_merge(deep_merge(base, overlay), {"run_name": name})
        try:
            typed[name] = from_dict(SpadeConfig, resolve_layers(data))
        except ConfigError as exc:
            raise WorkflowError(f"invalid configuration: config key '{key}.{name}': {exc}")
        raw[name] = data
    return typed, raw


def _single_run_key(key):
    if MULTI_RUN:
        raise WorkflowError(
            f"invalid configuration: config key '{key}' needs a single-run config (the toy, "
            "configs/default.yaml); a multi-run config lists every run under 'runs'"
        )


def _extra_runs(key):
    """The runs of an overlay key of a single-run config (`learning_check`, `toy_tool_use`, `toy_ablations`), added
    to RUNS."""
    if key not in config:
        return []
    _single_run_key(key)
    typed, data = _load_overlay_runs(key, config[key], WORKFLOW_CONFIG)
    RUNS.update(typed)
    _RUN_DATA.update(data)
    return list(typed)


MAIN_RUNS = list(RUNS)
# `learning_check` (configs/default.yaml): short extra runs on a task a tiny model learns (spade.envs.checks), which
# show whether training moves anything at all (issue 16); target `learning_check`
LEARNING_CHECKS = _extra_runs("learning_check")
# `mechanism_check` (configs/default.yaml): SPADE runs whose designer writes an environment's difficulty, each seed
# with its control (no designer training); the default target trains them and tables what their records show
MECHANISM_CHECKS = _extra_runs("mechanism_check")
TOY_TOOL_USE = _extra_runs("toy_tool_use")  # the tool-use toy (Table 2, Figure 1 right, tool_use_gain)
TOY_ABLATIONS = _extra_runs("toy_ablations")
# The runs the paper artifacts build before rendering (their outputs are declared inputs): the main runs, and the toy
# ablation or tool-use runs only when the target `toy_ablations` or `toy_tool_use` is asked for on the command line
# (Snakemake knows its targets only after parsing). Any other mapped run is read as it is, if it exists, and its
# files' fingerprint is a param: so `snakemake paper` on the toy config renders in minutes with those rows "not run",
# and picks them up once `snakemake toy_ablations` / `snakemake toy_tool_use` has made them.
PAPER_BUILT_RUNS = list(MAIN_RUNS)
PAPER_BUILT_RUNS += TOY_TOOL_USE if "toy_tool_use" in sys.argv[1:] else []
PAPER_BUILT_RUNS += TOY_ABLATIONS if "toy_ablations" in sys.argv[1:] else []

OUT = paths.ResultPaths(SPADE.results_dir)
LEARNING_CHECK_TABLE = f"{OUT.root}/tables/learning_check.md"  # the held-out win rate of every learning-check run
MECHANISM_CHECK_TABLE = f"{OUT.root}/tables/mechanism_check.md"  # the mechanism check's verdict (issue 39)
MECHANISM_CHECK_FIGURE = f"{OUT.root}/figures/mechanism_check.pdf"  # designer reward and learnable share per round

# Job config files. A job reads the config of its run (the run as the workflow merged it: config files and --config
# overrides; the job resolves the layers recipe < model card < run, as for any config file) from a YAML file:
# `spade <command> --config <results_dir>/configs/<run>-<hash>.yaml`, the hash of the file's content, so a changed
# config is a new file and a job submitted earlier still reads its own. The param `config_file` of each rule that
# reads one (run_config_file, workflow_config_file, ...) writes it when Snakemake plans the job (dry runs included,
# so a printed command can be run by hand), if it is missing or differs. The files are not declared inputs: each
# rule's `config` param (a hash of the keys it reads) is what reruns it when the config changes, and the path, which
# changes with every key of the run, is an Untracked param.
JOB_CONFIG_DIR = f"{OUT.root}/configs"
_JOB_CONFIG_TEXT = {}  # path -> the file's text
_JOB_CONFIG_WRITTEN = set()  # paths checked or written by this process


def _job_config(label, data):
    """The path of the config file of `data` (a run's settings, or the workflow's); its text is kept for
    job_config_param."""
    plain = json.loads(json.dumps(data, sort_keys=True))  # plain JSON types: what the jobs read
    body = yaml.safe_dump(plain, sort_keys=True, allow_unicode=True, default_flow_style=False)
    if json.dumps(yaml.safe_load(body), sort_keys=True) != json.dumps(plain, sort_keys=True):
        raise WorkflowError(f"the config of {label!r} does not survive a YAML round trip; please report this")
    path = f"{JOB_CONFIG_DIR}/{label}-{hashlib.sha256(body.encode()).hexdigest()[:12]}.yaml"
    header = (
        f"# The config of {label!r} as the workflow merged it (config files, --config overrides), read by its "
        "jobs:\n# `spade <command> --config <this file>`. Written by the workflow (rules/common.smk); the name "
        "holds a hash of the content.\n"
    )
    _JOB_CONFIG_TEXT[path] = header + body
    return path


def job_config_param(path):
    """The value of a `config_file` param: writes the job config file `path` (atomically) unless it holds its text
    already, and gives the quoted path, Untracked."""
    if path not in _JOB_CONFIG_WRITTEN:
        file, text = Path(path), _JOB_CONFIG_TEXT[path]
        try:
            if not (file.is_file() and file.read_text(encoding="utf-8") == text):
                atomic_write_text(file, text)
        except OSError as exc:
            raise WorkflowError(f"cannot write the job config file {path} (config key results_dir): {exc}")
        _JOB_CONFIG_WRITTEN.add(path)
    return Untracked(shlex.quote(path))


RUN_CONFIG = {name: _job_config(name, data) for name, data in _RUN_DATA.items()}
# the workflow-wide rules (library check, sandbox and throughput benchmarks) read the workflow config; with a
# single-run config that is the run's own file
WORKFLOW_CONFIG_FILE = _job_config("workflow" if MULTI_RUN else SPADE.run_name, WORKFLOW_CONFIG)


def run_config_file(wildcards):
    """The param `config_file` of a run-level rule: its run's job config file."""
    return job_config_param(RUN_CONFIG[wildcards.run])


def workflow_config_file(wildcards):
    """The param `config_file` of a workflow-wide rule: the workflow's job config file."""
    return job_config_param(WORKFLOW_CONFIG_FILE)


def _regex(names):
    """A wildcard constraint matching exactly these names (nothing at all when there are none)."""
    return "|".join(re.escape(name) for name in sorted(names)) or "(?!)"


RUN_PATTERN = _regex(RUNS)  # the `run` wildcard of the run-level rules: configured runs only


def _settings_hash(settings, keys):
    picked = {}
    for key in keys:
        value = settings
        for part in key.split("."):
            value = value[part]
        picked[key] = value
    return hashlib.sha256(json.dumps(picked, sort_keys=True, default=str).encode()).hexdigest()[:16]


def config_hash(*keys):
    """Hash of the named (dotted) sections of the workflow config: a rule's `params`, so that changing a key it reads
    reruns it.

    A job reads its whole run config from a file (its path is Untracked), so Snakemake does not see what the config
    holds; this parameter is what its `params` rerun trigger compares.
    """
    return _settings_hash(asdict(SPADE), keys)


def run_config_hash(*keys):
    """As config_hash, of the config of the job's run (the `run` wildcard): a params function."""

    def hash_of(wildcards):
        return _settings_hash(asdict(RUNS[wildcards.run]), keys)

    return hash_of


def _openrlhf(name, settings):
    try:
        return resolve_openrlhf(settings)
    except ConfigError as exc:
        raise WorkflowError(f"invalid configuration: run {name!r}: {exc}")


# Each run's OpenRLHF section: the run's `openrlhf` keys over the model card's preset (configs/openrlhf/<card>.yaml).
# It decides whether the run trains on GPUs and how many nodes and GPUs its training job asks for, so the SLURM
# allocation and the launcher's placement come from the same numbers.
OPENRLHF = {name: _openrlhf(name, settings) for name, settings in RUNS.items()}


def is_gpu_run(run):
    """Whether a run trains on GPUs through OpenRLHF (its `openrlhf.enabled`)."""
    return OPENRLHF[run].enabled


def cpu_run_threads():
    """Threads of a CPU run's `train` and `evaluate` jobs (the toy's): every core Snakemake has, less one left to the
    mechanism check's runs when the config has them. The default target trains those beside the toy, and the toy's
    chain (training, then its evaluations) is the run's longest: on 2 cores it starts at once on one core
    (`chain_priority`) instead of waiting for the six mechanism trainings to free both (issue 48; its decoding, most
    of its time, gains little from a second thread)."""
    return max(1, workflow.cores - 1) if MECHANISM_CHECKS else workflow.cores


def chain_priority(wildcards):
    """Priority of `train` and `evaluate` jobs: a CPU run's (the toy's) first, as the default target's longest chain
    (`cpu_run_threads`); 0 for every other run."""
    return 1 if wildcards.run not in MECHANISM_CHECKS and not is_gpu_run(wildcards.run) else 0


def train_threads(wildcards):
    """Threads of a `train` job. A GPU run's job is a launcher: its own srun steps take the nodes' CPUs for Ray
    (spade.rlhf.script), so it asks for 1. `workflow.cores` is the submit host's count, and the SLURM executor would
    turn it into the job step's --cpus-per-task, which fails on a GPU node with fewer cores (issue 31). A rehearsal
    run (openrlhf.cpu) uses every core Snakemake has: its Ray cluster is local, and two would share its ports. A CPU
    run (the toy): `cpu_run_threads`."""
    if wildcards.run in MECHANISM_CHECKS:
        return 1  # a tiny model: one thread each, so two of the six runs train at once on 2 cores (issue 48)
    if is_gpu_run(wildcards.run):
        return workflow.cores if OPENRLHF[wildcards.run].cpu else 1
    return cpu_run_threads()


def eval_threads(wildcards):
    """Threads of an `evaluate` job: 1 for a mechanism run's (a tiny model) and a rehearsal run's (a tiny model; one
    evaluation keeps about one core busy, so two run at once between the rehearsal's trainings, issue 46),
    `cpu_run_threads` for the toy's, else every core Snakemake has."""
    if wildcards.run in MECHANISM_CHECKS:
        return 1
    if is_gpu_run(wildcards.run):
        return 1 if OPENRLHF[wildcards.run].cpu else workflow.cores
    return cpu_run_threads()


def train_resources():
    """Resources of the GPU training jobs: whole nodes, `openrlhf.num_nodes` of them with `openrlhf.gpus_per_node`
    GPUs each (SLURM --nodes and --gres=gpu:N, N per node). None when every run trains on the CPU (the toy)."""
    if not any(is_gpu_run(run) for run in RUNS):
        return {}
    return {
        "nodes": lambda wildcards: OPENRLHF[wildcards.run].num_nodes if is_gpu_run(wildcards.run) else 1,
        "gres": lambda wildcards: f"gpu:{OPENRLHF[wildcards.run].gpus_per_node}" if is_gpu_run(wildcards.run) else "",
    }


# `snakemake --profile slurm preflight` (rules/preflight.smk): its fixed config, and the node it asks for
PREFLIGHT_CONFIGS = ["configs/default.yaml", "configs/preflight.yaml"]
PREFLIGHT_PLACEMENT = resolve_openrlhf(load_config(*map(repo_path, PREFLIGHT_CONFIGS)))


EVAL_SHARED = [
    "eval.seed",
    "eval.sampling",
    "eval.temperature",
    "eval.top_p",
    "eval.top_k",
    "eval.max_new_tokens",
    "eval.max_context_tokens",
    "eval.max_items",
    "model",
    "sandbox",
    "inference",
]  # what every evaluation's results depend on


def eval_config_hash(wildcards):
    return _settings_hash(asdict(RUNS[wildcards.run]), [*EVAL_SHARED, f"eval.{wildcards.benchmark}"])


BENCHMARKS = sorted(registry())  # every registered benchmark name (the `benchmark` wildcard)


def _sources(label, keys, pick, remedy):
    """{value: (config, job config file)} for a workflow-wide output that runs share (a model folder, a corpus): the runs
    that use it must agree on the config sections it is built from (`keys`); `remedy` says how to separate them."""
    found = {}
    for name, settings in RUNS.items():
        value = pick(settings)
        if value is None:
            continue
        if value in found and _settings_hash(asdict(found[value][0]), keys) != _settings_hash(asdict(settings), keys):
            raise WorkflowError(
                f"invalid configuration: runs {found[value][2]!r} and {name!r} share the {label} "
                f"{value!r} but differ in config keys {', '.join(keys)}; {remedy}"
            )
        found.setdefault(value, (settings, RUN_CONFIG[name], name))
    return {value: (settings, json_arg) for value, (settings, json_arg, _) in found.items()}


def _corpus_kind(settings):
    """The built corpus a run reads, or None (its own corpus.path, or grounding disabled)."""
    if settings.corpus.path or not settings.corpus.enabled:
        return None
    return "tool_use" if settings.selfplay.flavour == "tool_use" else "games"


MODEL_CARDS = _sources(
    "model folder",
    ["model"],
    lambda settings: settings.model.name,
    "give one of them a model card of its own (configs/models/, another `name`)",
)
MODEL_CARDS.setdefault(SPADE.model.name, (SPADE, WORKFLOW_CONFIG_FILE))  # the workflow's own model (eval_throughput)
if MULTI_RUN:
    CORPUS_KINDS = _sources(
        "corpus",
        ["corpus", "selfplay.flavour", "seed"],
        _corpus_kind,
        "point one of them at a corpus of its own (corpus.path), e.g. one built with "
        "`spade corpus build --config <its run file> --out <file>`",
    )
else:  # the corpus of the run's flavour can be built (`snakemake results/corpus/games.jsonl`) even if the run reads none;
    # an extra run of another flavour (the tool-use toy) builds its own from its config
    CORPUS_KINDS = {"tool_use" if SPADE.selfplay.flavour == "tool_use" else "games": (SPADE, WORKFLOW_CONFIG_FILE)}
    for _name in TOY_TOOL_USE + TOY_ABLATIONS:
        if (_kind := _corpus_kind(RUNS[_name])) is not None and _kind not in CORPUS_KINDS:
            CORPUS_KINDS[_kind] = (RUNS[_name], RUN_CONFIG[_name])


def library_outputs():
    return [OUT.library_check_json, OUT.library_report_md]


def corpus_input(wildcards):
    """The offline corpus the pipeline builds, unless the run points at its own (or disables grounding)."""
    kind = _corpus_kind(RUNS[wildcards.run])
    return [] if kind is None else OUT.corpus(kind)


def model_input(wildcards):
    return OUT.model_dir(RUNS[wildcards.run].model.name)


def checkpoint_input(wildcards):
    """Step 0 needs the base model; later steps need the finished run (its checkpoints then exist)."""
    if int(wildcards.step) == 0:
        return OUT.model_dir(RUNS[wildcards.run].model.name)
    return OUT.run_summary(wildcards.run)


def checkpoint_folder(wildcards):
    if int(wildcards.step) == 0:
        return OUT.model_dir(RUNS[wildcards.run].model.name)
    return OUT.checkpoint(wildcards.run, wildcards.step)


def eval_steps(run):
    return [0] + RUNS[run].selfplay.checkpoint_steps()


def run_eval_files(run):
    """Every checkpoint (step 0 = base) of one run on its `eval.during_training` benchmarks: the curves."""
    return [OUT.eval_file(run, step, name) for name in RUNS[run].eval.during_training for step in eval_steps(run)]


def eval_files(wildcards=None):
    """The curves of every main run."""
    return [path for run in MAIN_RUNS for path in run_eval_files(run)]


def selection_files(wildcards):
    """The results `eval.select_by` reads: its benchmarks at every checkpoint of the run (not the base model)."""
    settings = RUNS[wildcards.run]
    names = sorted({selector.partition(":")[0] for selector in settings.eval.select_by})
    return [OUT.eval_file(wildcards.run, step, name) for name in names for step in settings.selfplay.checkpoint_steps()]


def run_suite_files(run):
    """`eval.final` benchmarks of one run on the base model and the final checkpoint, plus its curves. A toy ablation
    evaluates only its final checkpoint: its base model is the main run's, whose base row the tables use."""
    settings = RUNS[run]
    final = ([] if run in TOY_ABLATIONS else [0]) + [settings.selfplay.checkpoint_steps()[-1]]
    extra = [OUT.eval_file(run, step, name) for name in settings.eval.final for step in final]
    return list(dict.fromkeys(run_eval_files(run) + extra))


def suite_files(wildcards=None):
    """The suite files of every main run."""
    return [path for run in MAIN_RUNS for path in run_suite_files(run)]


RUN_DIRS = [OUT.run_dir(run) for run in MAIN_RUNS]  # the param `runs` (--runs) of the tables over the main runs


def heldout_measure(wildcards):
    """The 'benchmark:metric' the run table and training figure show as held-out: the run's first eval.select_by."""
    return RUNS[wildcards.run].eval.select_by[0]


def run_outputs():
    return (
        [OUT.results_table]
        + [path for run in MAIN_RUNS for path in (OUT.run_table(run), OUT.training_figure(run))]
        + ([MECHANISM_CHECK_TABLE, MECHANISM_CHECK_FIGURE] if MECHANISM_CHECKS else [])
    )


def mechanism_pairs():
    """(trained run, control run) of each seed of `mechanism_check`: a run with selfplay.train_designer false is the
    control of the trained run of the same seed (one of each per seed, checked here)."""
    trained = {RUNS[run].seed: run for run in MECHANISM_CHECKS if RUNS[run].selfplay.train_designer}
    control = {RUNS[run].seed: run for run in MECHANISM_CHECKS if not RUNS[run].selfplay.train_designer}
    if sorted(trained) != sorted(control) or len(trained) + len(control) != len(MECHANISM_CHECKS):
        raise WorkflowError(
            "invalid configuration: config key 'mechanism_check' must hold, for each seed, one run that trains its "
            f"designer and one with selfplay.train_designer false; got trained seeds {sorted(trained)}, control "
            f"seeds {sorted(control)} over {len(MECHANISM_CHECKS)} runs"
        )
    return [(trained[seed], control[seed]) for seed in sorted(trained)]


from spade.analysis.mechanism import HELDOUT_BENCHMARK as MECHANISM_HELDOUT  # scores the mechanism runs (issue 48)


def mechanism_heldout_results():
    """The `mechanism_check_heldout` results the mechanism check reads (paper/scripts/table_mechanism_check.py finds
    them in the run folders): every mechanism run's at its last checkpoint, and the base model's, which every
    mechanism run starts from, evaluated once as the first trained run's step 0."""
    pairs = mechanism_pairs()
    if not pairs:  # a config without mechanism runs (the rule is then never asked for)
        return []
    last = [
        OUT.eval_file(run, RUNS[run].selfplay.checkpoint_steps()[-1], MECHANISM_HELDOUT)
        for pair in pairs
        for run in pair
    ]
    return [OUT.eval_file(pairs[0][0], 0, MECHANISM_HELDOUT)] + last


def learning_check_results(which):
    """The `learning_check` result of every learning-check run at step 0 (`which` "base") or at its last checkpoint."""
    return [
        OUT.eval_file(run, 0 if which == "base" else RUNS[run].selfplay.checkpoint_steps()[-1], "learning_check")
        for run in LEARNING_CHECKS
    ]


def pending_outputs():
    """What the runs our code cannot train yet would produce first: their rule fails at once, saying why."""
    return [OUT.run_summary(run) for run in PENDING]


def paper_run_outputs():
    """Multi-run configs: every run's suite (base and final checkpoint on every benchmark, the curves) and its
    selected checkpoint, and the pending runs' failing targets (the paper target itself is added in the Snakefile)."""
    return suite_files() + [OUT.selected_checkpoint(run) for run in MAIN_RUNS] + pending_outputs()


def train_backend(wildcards):
    """`spade train --backend`: OpenRLHF for a GPU run, the local trainer otherwise (the CLI's own default)."""
    return "openrlhf" if is_gpu_run(wildcards.run) else "local"


# Under --software-deployment-method apptainer a GPU run's Ray processes and driver enter the image (the local
# trainer ignores the flags). Untracked: switching the deployment method does not retrain anything.
TRAIN_IMAGE = Untracked(
    f"--image {shlex.quote(repo_path(GPU_IMAGE))} --apptainer-args={shlex.quote(APPTAINER_ARGS)} "
    if IN_APPTAINER
    else ""
)


def card_config_hash(wildcards):
    """The `config` param of prepare_model: the model section of the run its folder is built from."""
    return _settings_hash(asdict(MODEL_CARDS[wildcards.card][0]), ["model"])


def card_warmup_files(wildcards):
    """The input of prepare_model: the learning-check environment file its format warm-up renders prompts from
    (`model.format_warmup.env`; the mechanism runs' template), so that an edited file rebuilds the model; else none."""
    from spade.envs.checks import CHECKS_DIR

    env = MODEL_CARDS[wildcards.card][0].model.format_warmup.env
    return [str(CHECKS_DIR / f"{env}.py")] if env else []


def card_config_file(wildcards):
    """The param `config_file` of prepare_model: the job config file of the run its folder is built from."""
    return job_config_param(MODEL_CARDS[wildcards.card][1])


def corpus_config_hash(wildcards):
    """The `config` param of build_corpus: the sections of the run its corpus is built from."""
    return _settings_hash(asdict(CORPUS_KINDS[wildcards.kind][0]), ["corpus", "selfplay.flavour", "seed"])


def corpus_config_file(wildcards):
    """The param `config_file` of build_corpus: the job config file of the run its corpus is built from."""
    return job_config_param(CORPUS_KINDS[wildcards.kind][1])


def pending_message(wildcards):
    """The param `message` of pending_run: why the run cannot be trained yet (shell-quoted)."""
    return shlex.quote(
        f"run {wildcards.run} cannot be trained yet: {PENDING[wildcards.run]} (config key "
        f'pending.{wildcards.run}; until then its paper rows, curves and numbers read "not run")'
    )


BENCHMARK_PATTERN = "|".join(BENCHMARKS)  # the `benchmark` wildcard's constraint


def fidelity_outputs():
    """Designer fidelity of every main run: its base model and its last checkpoint."""
    return [
        OUT.fidelity_file(run, step) for run in MAIN_RUNS for step in (0, RUNS[run].selfplay.checkpoint_steps()[-1])
    ]


# the folder of the rules' `benchmark:` files, which the run table reads (the param `benchmarks_dir` of run_table)
BENCHMARKS_DIR = os.path.dirname(OUT.benchmark("rule"))
