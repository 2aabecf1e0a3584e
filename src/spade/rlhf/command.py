"""The OpenRLHF command: the exact ``python -m openrlhf.cli.train_ppo_ray`` argv of OpenRLHF 0.11.2, and its
check against OpenRLHF's *own* argument parser.

- ``openrlhf_command``: the argv, a pure function of the config and three paths; ``shell_command`` quotes it.
- ``probe_parser`` / ``check_command`` / ``verify_command``: run OpenRLHF's parser (the ``__main__`` block of
  ``openrlhf/cli/train_ppo_ray.py``, which needs ray and vLLM to import) in a subprocess with those imports
  stubbed, parse our argv with it, and compare every flag with its parser entry.
- ``LaunchError``: the GPU launch cannot proceed (the parser check here, the launch itself in ``launch``).

Design and the flag table: docs/OPENRLHF.md ("Launcher").
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from spade.config import logprob_temperature
from spade.configtools import ConfigError
from spade.rlhf.config import OpenRLHFConfig, resolve_openrlhf, split_extra_args
from spade.rlhf.placement import checked_ticket_plan, placement

OPENRLHF_VERSION = "0.11.2"
ENTRY_POINT = "openrlhf.cli.train_ppo_ray"
WANDB_KEY = "${WANDB_API_KEY:?set WANDB_API_KEY for wandb logging}"  # expanded by the shell, never printed
# logging.wandb (offline W&B): OpenRLHF builds its W&B logger only when --logger.wandb.key is non-empty
# (openrlhf/trainer/ppo_trainer.py), and offline wandb never reads the key (wandb 0.31.0's wandb.login returns before
# using it when WANDB_MODE=offline, which script.logger_env sets): the flag carries this word as the switch
WANDB_OFFLINE_KEY = "offline"

# Flags the plugin needs off or unset (docs/OPENRLHF.md): extra_args may not set them.
FORBIDDEN_FLAGS = {
    "--train.async_enable": "the coordinator needs one synchronous batch per step",
    "--train.partial_rollout_enable": "the coordinator needs one synchronous batch per step",
    "--rollout.vllm_generate_batch_size": "one SPADE step is exactly one rollout batch",
    "--algo.dynamic_filtering_enable": "it would request replacement tickets",
    "--eval.dataset": "evaluation runs through our own pipeline (spade eval)",
    "--reward.normalize_enable": "rewards are our advantages already",
    "--reward.overlong_buffer_len": "rewards are our advantages already",
    "--reward.stop_properly_penalty_coef": "rewards are our advantages already",
    "--algo.advantage.no_std_norm": "irrelevant under dr_grpo",
    "--actor.entropy_coef": "not part of the paper's loss",
    "--actor.dual_clip": "not part of the paper's loss",
    "--data.apply_chat_template": "tickets are read verbatim",
    "--data.input_template": "tickets are read verbatim",
}
# Where the launcher takes a flag from (for the error when extra_args repeats one).
FLAG_SOURCES = {
    "--actor.adam.lr": "train.learning_rate", "--actor.adam.betas": "train.adam_beta1/adam_beta2",
    "--actor.adam.weight_decay": "train.weight_decay", "--actor.eps_clip_low_high": "train.eps_low/eps_high",
    "--algo.kl.init_coef": "train.kl_coef", "--train.batch_size": "train.global_batch",
    "--actor.max_norm": "train.max_grad_norm", "--train.seed": "seed",
    "--rollout.n_samples_per_prompt": "train.global_batch / slots (selfplay.group_size with batch_structure 'groups')", "--rollout.temperature": "train.logprob_temperature (null: agent.temperature)",
    "--rollout.top_p": "agent.top_p", "--data.max_len": "openrlhf.max_len", "--ckpt.save_steps": "selfplay.checkpoint_every",
    "--algo.advantage.is_correction_threshold": "train.tis_cap", "--actor.loss_agg_mode": "train.loss_aggregation",
}

AGENT_FUNC_PATH = Path(__file__).with_name("agent_func.py")  # the file --train.agent_func_path loads


class LaunchError(RuntimeError):
    """The GPU launch cannot proceed; the message says what is missing and what to do."""


# ----- the command ----------------------------------------------------------------------------------------


def _num(value) -> str:
    if isinstance(value, bool):
        raise TypeError(f"a number was expected, got {value!r}")
    return str(value) if isinstance(value, int) else repr(float(value))


def run_paths(run_dir) -> dict:
    """Where OpenRLHF writes inside the run folder."""
    root = Path(run_dir) / "openrlhf"
    return {"root": root, "ckpt": root / "ckpt", "final": root / "final", "tensorboard": root / "tensorboard",
            "script": root / "launch.sh", "tickets": Path(run_dir) / "tickets.jsonl"}


def openrlhf_command(config, run_dir, model_dir, corpus_path=None, orl: OpenRLHFConfig | None = None,
                     python: str = "python") -> list:
    """The exact ``train_ppo_ray`` argv (dotted flags of OpenRLHF 0.11.2). Pure: reads and writes nothing.
    The ticket dataset and run spec it points at are written by ``spade.rlhf.launch.prepare_run``; the batch size
    and G are the ones ``prepare_run`` returns (both come from ``ticket_plan``)."""
    orl = orl or resolve_openrlhf(config)
    if config.corpus.enabled and not corpus_path:
        raise ConfigError("corpus.enabled is true but no corpus was given (corpus.path or --corpus); the "
                          "coordinator grounds every design prompt in it")
    if config.agent.turn_samples != "episode":
        raise ConfigError(f"config key 'agent.turn_samples' is {config.agent.turn_samples!r}, which the OpenRLHF "
                          "backend cannot train (each ticket returns a fixed number of responses, one per episode); "
                          "allowed with --backend openrlhf: 'episode'. 'per_turn' runs on the local trainer")
    if config.train.tis and config.train.tis_samples != "all":
        raise ConfigError(f"config key 'train.tis_samples' is {config.train.tis_samples!r}, which the OpenRLHF backend "
                          "cannot train (its importance-sampling correction weighs every sample); allowed with "
                          "--backend openrlhf: 'all'. 'delayed' runs on the local trainer")
    if config.train.frozen:
        raise ConfigError(f"config key 'train.frozen' is {config.train.frozen!r}, which the OpenRLHF backend does not "
                          "apply (it trains every weight); allowed with --backend openrlhf: []. A frozen list runs on "
                          "the local trainer")
    place = placement(config, orl)
    plan = checked_ticket_plan(config)
    # absolute paths: Ray workers do not share the driver's working directory
    run_dir, model_dir = os.path.abspath(run_dir), os.path.abspath(model_dir)
    train, paths = config.train, run_paths(run_dir)
    cmd = [python, "-m", ENTRY_POINT,
           # placement
           "--actor.num_nodes", _num(place["actor"]["nodes"]),
           "--actor.num_gpus_per_node", _num(place["actor"]["gpus_per_node"])]
    if place["ref"]:
        cmd += ["--ref.num_nodes", _num(place["ref"]["nodes"]),
                "--ref.num_gpus_per_node", _num(place["ref"]["gpus_per_node"])]
    cmd += ["--vllm.num_engines", _num(orl.vllm_num_engines),
            "--vllm.tensor_parallel_size", _num(orl.vllm_tensor_parallel_size),
            "--vllm.gpu_memory_utilization", _num(orl.vllm_gpu_memory_utilization)]
    cmd += ["--vllm.enable_prefix_caching"] * orl.vllm_enable_prefix_caching
    cmd += ["--vllm.enforce_eager"] * orl.vllm_enforce_eager
    if orl.colocate_all_models:
        cmd += ["--train.colocate_all", "--vllm.enable_sleep", "--ds.enable_sleep"]
    elif place["colocate_actor_ref"]:
        cmd += ["--train.colocate_actor_ref"]
    # DeepSpeed
    cmd += ["--ds.zero_stage", _num(orl.zero_stage), "--ds.param_dtype", orl.param_dtype,
            "--ds.attn_implementation", orl.attn_implementation]
    cmd += ["--actor.gradient_checkpointing_enable"] * orl.gradient_checkpointing
    cmd += ["--ds.adam_offload"] * orl.adam_offload
    cmd += ["--ds.packing_samples"] * orl.packing_samples
    cmd += ["--ref.offload"] * (orl.ref_offload and bool(place["ref"]))
    # model, plugin and tickets
    cmd += ["--actor.model_name_or_path", str(model_dir),
            "--train.agent_func_path", str(AGENT_FUNC_PATH),
            "--data.prompt_dataset", str(paths["tickets"]),
            "--data.input_key", "prompt", "--data.label_key", "label",
            "--data.max_len", _num(place["max_len"])]
    # rollout: one SPADE step = one rollout batch of tickets, G responses each
    cmd += ["--rollout.batch_size", _num(plan.tickets_per_step),
            "--rollout.n_samples_per_prompt", _num(plan.group_size),
            "--rollout.micro_batch_size", _num(orl.rollout_micro_batch_size),
            # OpenRLHF's actor and reference model divide their logits by it (models/actor.py); our executor
            # samples every request at the role's own temperature (engine.to_engine_params)
            "--rollout.temperature", _num(logprob_temperature(config)),
            "--rollout.top_p", _num(config.agent.top_p)]
    # the objective (spec 6, Table 5)
    cmd += ["--algo.advantage.estimator", "dr_grpo", "--reward.clip_range", "-1000", "1000"]
    if train.tis:
        cmd += ["--algo.advantage.is_correction_level", "token", "--algo.advantage.is_correction_mode", "clip",
                "--algo.advantage.is_correction_gating", "ratio",
                "--algo.advantage.is_correction_threshold", "0", _num(train.tis_cap)]
    else:
        cmd += ["--algo.advantage.is_correction_level", "off"]
    aggregation = {"token_mean": "token-mean", "seq_mean_token_mean": "seq-mean-token-mean"}[train.loss_aggregation]
    cmd += ["--actor.policy_loss_type", "ppo", "--actor.loss_agg_mode", aggregation,
            "--actor.eps_clip_low_high", _num(train.eps_low), _num(train.eps_high),
            "--algo.kl.init_coef", _num(train.kl_coef)]
    if train.kl_coef > 0:
        cmd += ["--algo.kl.use_loss", "--algo.kl.estimator", "k3"]
    cmd += ["--actor.adam.lr", _num(train.learning_rate),
            "--actor.adam.betas", _num(train.adam_beta1), _num(train.adam_beta2),
            "--actor.adam.weight_decay", _num(train.weight_decay),
            "--actor.lr_scheduler", "constant", "--actor.lr_warmup_ratio", "0",
            "--actor.max_norm", _num(train.max_grad_norm),
            "--train.batch_size", _num(train.global_batch),
            "--train.micro_batch_size", _num(orl.train_micro_batch_size),
            "--train.max_epochs", "1", "--train.num_episodes", "1",
            "--train.seed", _num(config.seed)]
    # checkpoints (same steps as the coordinator's spade_state/) and logs, all under the run folder
    cmd += ["--ckpt.path", str(paths["ckpt"]), "--ckpt.save_steps", _num(config.selfplay.checkpoint_every),
            "--ckpt.save_hf", "--ckpt.max_num", _num(orl.ckpt_max_num), "--ckpt.load_enable",
            "--ckpt.output_dir", str(paths["final"]),
            "--logger.logging_steps", "1"]
    # OpenRLHF's own loggers (logging.tensorboard, logging.wandb); our SPADE metrics go beside them from the
    # coordinator (spade.train.live_metrics, <run_dir>/tensorboard/ and <run_dir>/wandb/)
    if config.logging.tensorboard:
        cmd += ["--logger.tensorboard_dir", str(paths["tensorboard"])]
    # the TensorBoard folder is <tensorboard_dir>/<run_name>; OpenRLHF's default name holds a timestamp
    cmd += ["--logger.wandb.run_name", config.run_name]
    if config.logging.wandb:  # offline (logger_env): same run name and group as the coordinator's W&B run
        cmd += ["--logger.wandb.key", WANDB_OFFLINE_KEY, "--logger.wandb.project", config.logging.wandb_project,
                "--logger.wandb.group", config.run_name]
    elif orl.wandb_project:
        cmd += ["--logger.wandb.key", WANDB_KEY, "--logger.wandb.project", orl.wandb_project]
    ours = {token for token in cmd if token.startswith("--")}
    for flag, values in split_extra_args(orl.extra_args):
        if flag in FORBIDDEN_FLAGS:
            raise ConfigError(f"config key 'openrlhf.extra_args' sets {flag}, which must stay off: "
                              f"{FORBIDDEN_FLAGS[flag]} (docs/OPENRLHF.md)")
        if flag in ours:
            source = FLAG_SOURCES.get(flag, "the launcher (from the typed config)")
            raise ConfigError(f"config key 'openrlhf.extra_args' repeats {flag}, which is set from {source}")
        cmd += [flag, *values]
    return cmd


def shell_command(argv: list) -> str:
    """The argv as one shell line; the wandb key stays a shell expansion."""
    return " ".join(f'"{token}"' if token == WANDB_KEY else shlex.quote(token) for token in argv)


# ----- OpenRLHF's own parser ------------------------------------------------------------------------------

# Runs in a fresh interpreter: stub the modules train_ppo_ray.py needs only inside train() (ray, vLLM, the
# Ray actors, the DeepSpeed strategy), execute the script as __main__ so that its own code builds the parser,
# parse each argv with it, let the script's post-parse checks run, and stop at the first line of train().
_PROBE = r'''
import argparse, contextlib, importlib.metadata, importlib.util, io, json, runpy, sys, types
from pathlib import Path

class Reached(BaseException):
    pass

class Rejected(BaseException):
    pass

def stub(name, **attrs):
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    module.__getattr__ = lambda attr: object
    sys.modules[name] = module
    return module

def is_initialized():
    raise Reached(sys._getframe(1).f_locals.get("args"))

spec = importlib.util.find_spec("openrlhf")
root = Path(spec.origin).parent
stub("ray", is_initialized=is_initialized)
stub("ray.util")
stub("ray.util.placement_group")
for name in ("openrlhf.trainer.ray", "openrlhf.trainer.ray.launcher", "openrlhf.trainer.ray.ppo_actor",
             "openrlhf.trainer.ray.ppo_critic"):
    stub(name)
stub("openrlhf.utils", __path__=[str(root / "utils")])  # keeps the real openrlhf.utils.config (hierarchize)

parsers = []
original = argparse.ArgumentParser.parse_args
def error(self, message):
    raise Rejected(message)
argparse.ArgumentParser.error = error

def plain(value):
    if isinstance(value, types.SimpleNamespace):
        return {k: plain(v) for k, v in vars(value).items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)

results = []
for argv in json.load(sys.stdin):
    def parse_args(self, args=None, namespace=None, _argv=argv):
        parsers.append(self)
        return original(self, _argv, namespace)
    argparse.ArgumentParser.parse_args = parse_args
    out = io.StringIO()
    result = {"parsed": None, "error": None}
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(str(root / "cli" / "train_ppo_ray.py"), run_name="__main__")
        result["error"] = "train_ppo_ray.py finished without reaching train()"
    except Reached as reached:
        result["parsed"] = plain(reached.args[0])
    except Rejected as exc:
        result["error"] = "argparse: " + str(exc)
    except AssertionError as exc:
        result["error"] = "assertion in train_ppo_ray.py: " + str(exc)
    result["printed"] = out.getvalue()
    results.append(result)

flags = {}
for action in parsers[-1]._actions if parsers else []:
    for option in action.option_strings:
        flags[option] = {"dest": action.dest, "nargs": action.nargs, "kind": type(action).__name__,
                         "type": getattr(action.type, "__name__", None),
                         "choices": list(action.choices) if action.choices is not None else None}
print(json.dumps({"version": importlib.metadata.version("openrlhf"), "source": str(root / "cli" / "train_ppo_ray.py"),
                  "flags": flags, "results": results}))
'''


def probe_parser(argvs: list, python: str | None = None, timeout: float = 120) -> dict:
    """OpenRLHF's parser table and the outcome of parsing each argv (flags after ``-m ENTRY_POINT`` or whole
    commands), from the installed package; ``{"version", "source", "flags": {flag: {...}}, "results": [...]}``."""
    python = python or sys.executable
    runner = list(python) if isinstance(python, (list, tuple)) else [python]
    tails = [_flags_of(argv) for argv in argvs]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "WANDB_"))}
    try:
        done = subprocess.run([*runner, "-c", _PROBE], input=json.dumps(tails), capture_output=True, text=True,
                              timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise LaunchError(f"reading OpenRLHF's parser took over {timeout} s") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise LaunchError(f"could not read OpenRLHF's argument parser with {shlex.join(runner)}: {last} "
                          f"(install it: pip install --no-deps openrlhf=={OPENRLHF_VERSION})")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _flags_of(argv: list) -> list:
    argv = list(argv)
    if "-m" in argv and ENTRY_POINT in argv:
        argv = argv[argv.index(ENTRY_POINT) + 1:]
    return ["wandb-key" if token == WANDB_KEY else token for token in argv]


def flag_groups(argv: list) -> list:
    """``[(flag, [values])]`` of an argv (a value is any token not starting with ``--``)."""
    groups = []
    for token in _flags_of(argv):
        if token.startswith("--"):
            groups.append((token, []))
        elif groups:
            groups[-1][1].append(token)
        else:
            raise ValueError(f"value {token!r} before any flag")
    return groups


def _arity_ok(entry: dict, count: int) -> bool:
    nargs = entry["nargs"]
    if entry["kind"] in ("_StoreTrueAction", "_StoreFalseAction", "_StoreConstAction", "_CountAction"):
        return count == 0
    if nargs is None:
        return count == 1
    if isinstance(nargs, int):
        return count == nargs
    return {"?": count <= 1, "*": True, "+": count >= 1}.get(nargs, False)


def check_command(argv: list, table: dict, result: dict | None = None) -> list:
    """Problems of ``argv`` against a parser table from ``probe_parser`` (empty list = fine): unknown flags
    (exact names: argparse would also accept abbreviations), repeated flags, wrong number of values, values
    outside ``choices``, and the parse/validation outcome of the real script when ``result`` is given."""
    problems, seen = [], set()
    flags = table["flags"]
    for flag, values in flag_groups(argv):
        if flag in seen:
            problems.append(f"{flag} is given twice")
        seen.add(flag)
        entry = flags.get(flag)
        if entry is None:
            problems.append(f"{flag} is not a flag of OpenRLHF {table['version']} ({table['source']})")
            continue
        if not _arity_ok(entry, len(values)):
            problems.append(f"{flag} takes nargs={entry['nargs']!r} ({entry['kind']}) but gets {len(values)} "
                            f"value(s): {values}")
        if entry["choices"] and any(v not in entry["choices"] for v in values):
            problems.append(f"{flag} {values} is not among its choices {entry['choices']}")
    if result is not None and result.get("error"):
        problems.append(f"OpenRLHF's script rejects the command: {result['error']}")
    return problems


def verify_command(argv: list, python: str | None = None) -> dict:
    """Run ``argv`` through the installed OpenRLHF parser; raises ``LaunchError`` listing every problem."""
    table = probe_parser([argv], python)
    result = table["results"][0]
    problems = check_command(argv, table, result)
    if table["version"] != OPENRLHF_VERSION:
        problems.append(f"installed openrlhf is {table['version']}, the launcher targets {OPENRLHF_VERSION}")
    if problems:
        raise LaunchError("the OpenRLHF command does not match the installed parser:\n  " + "\n  ".join(problems))
    return result
