"""The OpenRLHF launcher: what ``spade train --backend openrlhf`` runs (GPU environment only).

The typed config (recipe + model card + run file + ``openrlhf`` placement, ``spade.rlhf.config``) becomes the run:
``prepare_run`` writes the run spec and the ticket dataset, ``launch`` checks the GPU stack, the loggers and the node's
environment (``spade.rlhf.guards``), checks the command (``spade.rlhf.command``) against the installed OpenRLHF
parser, writes and runs the launch script (``spade.rlhf.script``) and links the checkpoints; ``dry_run`` shows
placement, command and script without starting or writing anything.

Design and the flag table: docs/OPENRLHF.md ("Launcher").
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from spade.config import describe_fidelity
from spade.rlhf.command import (AGENT_FUNC_PATH, OPENRLHF_VERSION, LaunchError, flag_groups, openrlhf_command,
                                run_paths, shell_command, verify_command)
from spade.rlhf.config import OpenRLHFConfig, resolve_openrlhf
from spade.rlhf.guards import cpu_applicable_guards, environment_guards, failures
from spade.rlhf.placement import data_max_len, describe_placement, placement
from spade.rlhf.plan import ticket_plan, write_tickets
from spade.rlhf.prompt_budget import check_designer_prompts_fit, over_budget
from spade.rlhf.script import image_binds, image_prefix, launch_script

# the GPU training stack OpenRLHF 0.11.2 pins (its issue); the CPU environment has none of ray/vllm/deepspeed
GPU_STACK = ("openrlhf==0.11.2", "ray[default]==2.55.0", "vllm==0.29.0", "deepspeed==0.19.6", "transformers==5.15.0")
GPU_MODULES = ("ray", "vllm", "deepspeed", "openrlhf")


def prepare_run(config, run_dir, model_dir, corpus_path=None, engines: int = 1) -> dict:
    """Write ``<run_dir>/rlhf_run.json`` and ``<run_dir>/tickets.jsonl``; returns the values the launcher
    turns into OpenRLHF flags (see docs/OPENRLHF.md). Every path written is absolute, as in the command
    (``command.openrlhf_command``): Ray workers read them from another working directory."""
    from spade.rlhf.coordinator import write_run_spec

    run_dir, model_dir = Path(os.path.abspath(run_dir)), os.path.abspath(model_dir)
    corpus_path = os.path.abspath(corpus_path) if corpus_path else None
    plan = ticket_plan(config)
    spec = write_run_spec(run_dir, config, model_dir, corpus_path, engines)
    tickets = Path(run_dir) / "tickets.jsonl"
    write_tickets(tickets, plan, config.selfplay.total_steps, run_dir)
    return {"run_spec": str(spec), "prompt_dataset": str(tickets), "rollout_batch_size": plan.tickets_per_step,
            "n_samples_per_prompt": plan.group_size, "agent_func_path": str(AGENT_FUNC_PATH)}


def logger_modules(config) -> dict:
    """module -> config key, for the loggers the run switches on (``launch`` checks they import)."""
    return {name: key for name, key in (("tensorboard", "logging.tensorboard"), ("wandb", "logging.wandb"))
            if getattr(config.logging, key.split(".")[1])}


def check_logger_modules(config, python: list | None = None, where: str = "here") -> None:
    """Raise ``LaunchError`` naming the config key when a logger the run switches on cannot be imported here (or by
    the interpreter argv ``python``, an image's): before anything starts, not when OpenRLHF's trainer builds it."""
    from spade.train.live_metrics import WANDB_INSTALL, WANDB_VERSION

    loggers = logger_modules(config)
    hints = {"wandb": f"install it ({WANDB_INSTALL}; wandb=={WANDB_VERSION}) or set logging.wandb: false",
             "tensorboard": "install it (pip install tensorboard==2.21.0) or set logging.tensorboard: false"}
    missing = missing_gpu_modules(python, tuple(loggers))
    if missing:
        raise LaunchError("; ".join(f"config key '{loggers[name]}' is true, but the {name} package is missing {where}: "
                                    f"{hints[name]}" for name in missing))


def dry_run(config, run_dir, model_dir, corpus_path=None, orl: OpenRLHFConfig | None = None, image: str = "",
            apptainer_args: str = "--nv") -> str:
    """Placement, command and launch script as text; reads OpenRLHF's parser when openrlhf is installed.
    Writes nothing."""
    orl = orl or resolve_openrlhf(config)
    argv = openrlhf_command(config, run_dir, model_dir, corpus_path, orl, python="python" if image else sys.executable)
    lines = [f"# SPADE -> OpenRLHF {OPENRLHF_VERSION}: run {config.run_name} ({config.model_card}), dry run: "
             "nothing started, nothing written", "# placement"]
    lines += [f"#   {line}" for line in describe_placement(placement(config, orl))]
    from spade.evals.config import describe_sampling

    lines += [f"# {line}" for line in describe_sampling(config.eval) + describe_fidelity(config)]
    if importlib.util.find_spec("openrlhf") is None:
        lines.append(f"# parser check: skipped, openrlhf is not installed (pip install --no-deps "
                     f"openrlhf=={OPENRLHF_VERSION})")
    else:
        result = verify_command(argv)
        lines.append(f"# parser check: every flag exists in the installed openrlhf {OPENRLHF_VERSION} parser with "
                     "its number of values, and train_ppo_ray.py's own checks pass")
        lines += [f"#   openrlhf says: {line}" for line in result.get("printed", "").splitlines() if line.strip()]
    lines += ["# command", shell_command(argv), "# launch script (written to "
              f"{run_paths(run_dir)['script']} when not a dry run)", launch_script(config, run_dir, model_dir,
                                                                                    corpus_path, orl, image=image,
                                                                                    apptainer_args=apptainer_args)]
    return "\n".join(lines)


def missing_gpu_modules(python: list | None = None, names: tuple = GPU_MODULES) -> list:
    """The GPU-stack modules (or ``names``) that cannot be imported here, or by the interpreter argv ``python``
    (an image's)."""
    if python is None:
        return [name for name in names if importlib.util.find_spec(name) is None]
    code = ("import importlib.util, json; print(json.dumps([n for n in %r if importlib.util.find_spec(n) is None]))"
            % (tuple(names),))
    done = subprocess.run([*python, "-c", code], capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise LaunchError(f"could not run Python in the image ({shlex.join(python)}): {last}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _runtime(run_dir, model_dir, corpus_path, image: str, apptainer_args: str) -> list:
    """The interpreter argv of the GPU stack: this one, or the image's through ``apptainer exec``."""
    if not image:
        return [sys.executable]
    if not Path(image).is_file():
        raise LaunchError(f"--image {image}: no such file; build it (docs/CONTAINERS.md) or point SPADE_GPU_IMAGE "
                          "at it")
    if shutil.which("apptainer") is None:
        raise LaunchError(f"--image {image} needs `apptainer` on this host's PATH (module load apptainer?)")
    Path(run_dir).mkdir(parents=True, exist_ok=True)  # apptainer refuses to bind a folder that does not exist
    return image_prefix(image, apptainer_args, image_binds(run_dir, model_dir, corpus_path)) + ["python"]


def link_checkpoints(config, run_dir) -> list:
    """``<run_dir>/checkpoints/step_NNNNNN`` -> OpenRLHF's Hugging Face checkpoint of that step (relative
    symlinks), the layout evaluation reads; the final step falls back to ``--ckpt.output_dir``."""
    run_dir = Path(run_dir)
    paths = run_paths(run_dir)
    folder = run_dir / "checkpoints"
    folder.mkdir(parents=True, exist_ok=True)
    linked, missing = [], []
    for step in config.selfplay.checkpoint_steps():
        target = paths["ckpt"] / f"global_step{step}_hf"
        if not target.is_dir() and step == config.selfplay.total_steps:
            target = paths["final"]
        if not (target / "config.json").is_file():
            missing.append(str(target))
            continue
        link = folder / f"step_{step:06d}"
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(os.path.relpath(target, folder))
        linked.append(link.name)
    if missing:
        raise LaunchError(f"OpenRLHF finished but these checkpoints are missing: {missing}")
    return linked


REHEARSAL_LAUNCH_TIMEOUT_S = 3600  # one CPU launch of a rehearsal run; measured: at most 6 min (docs/OPENRLHF.md)


def rehearsal_records(run_dir) -> Path:
    """The records folder of a rehearsal run (``spade.rlhf.cpu.probes``), one subfolder per launch."""
    return Path(run_dir) / "rehearsal" / "records"


def rehearse(script: Path, run_dir, resume_at: int) -> dict:
    """The launch script of a rehearsal run (``openrlhf.cpu``), each launch in its own session with its records on:
    with ``resume_at`` > 0 a launch killed (SIGKILL to the whole session, Ray included) once step ``resume_at``'s
    generation has ended, then a second one in the same folder, which resumes from the last checkpoint (launches
    ``killed`` and ``resumed``); else one launch, ``full``. Returns {launch: timings}."""
    from spade.rlhf.cpu import probes
    from spade.rlhf.cpu.session import SessionError, run_session

    plan = [("killed", resume_at), ("resumed", None)] if resume_at else [("full", None)]
    timings = {}
    for name, kill_after in plan:
        env = {**os.environ, probes.RECORDS_ENV: str(rehearsal_records(run_dir) / name)}
        env.pop(probes.MUTATE_ENV, None)
        print(f"rehearsal: launch {name!r}" + (f", killed after step {kill_after}'s generation" if kill_after else ""),
              flush=True)
        try:
            timings[name] = run_session(["bash", str(script)], env, run_dir, kill_after_step=kill_after,
                                        timeout_s=REHEARSAL_LAUNCH_TIMEOUT_S)
        except SessionError as exc:
            raise LaunchError(str(exc)) from None
        if name == "killed" and not timings[name]["killed"]:
            raise LaunchError(f"the rehearsal launch to be killed ended before step {kill_after}'s generation (exit "
                              f"status {timings[name]['returncode']}); script: {script}")
        if name != "killed" and timings[name]["returncode"] != 0:
            raise LaunchError(f"the OpenRLHF run failed (exit status {timings[name]['returncode']}, launch {name!r}); "
                              f"script: {script}")
    return timings


def launch(config, model_dir, corpus_path, run_dir, image: str = "", apptainer_args: str = "--nv",
           served: bool = False) -> dict:
    """``spade train --backend openrlhf``: check the node's environment (``spade.rlhf.guards``), prepare the run
    (tickets, run spec), check the command against the installed parser (inside ``image`` when given), write and run
    the launch script, link the checkpoints and write ``summary.json`` (with what the guards saw). A rehearsal run
    (``openrlhf.cpu``) with ``baseline.external_serve`` first starts its designer server on this machine, as the local
    trainer does (``spade.designer.serve.local_designer``; ``served``: it runs already)."""
    from transformers import AutoTokenizer

    from spade.io import atomic_write_json, atomic_write_text
    from spade.provenance import stamp

    orl = resolve_openrlhf(config)
    if orl.cpu and not served:
        from spade.designer.serve import local_designer

        earlier = [path for path in Path(run_dir).glob("*") if path.name != "eval"]  # eval/: the base model's results
        if earlier:  # an attempt that was killed or failed: a rehearsal trains from step 0, its kill and resume its own
            print(f"rehearsal: removing the earlier attempt's {sorted(p.name for p in earlier)} from {run_dir}",
                  flush=True)
            for path in earlier:
                shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()

        with local_designer(config, model_dir, run_dir) as config:
            return launch(config, model_dir, corpus_path, run_dir, image, apptainer_args, served=True)
    if orl.cpu:  # the rehearsal: this path on the CPU, in the integration run's environment (spade.rlhf.cpu)
        if image:
            raise LaunchError(f"--image {image}: openrlhf.cpu (the rehearsal) runs in this Python environment, not "
                              "in an image; drop --image or set openrlhf.cpu: false")
        from spade.rlhf.cpu import environment

        os.environ.update(environment(nodes=orl.num_nodes))  # what the checks below, the launch script and every Ray
        # process inherit
    runtime = _runtime(run_dir, model_dir, corpus_path, image, apptainer_args)
    # on the CPU the vLLM build is on PYTHONPATH only, so the modules are looked for by a fresh interpreter
    missing = missing_gpu_modules(runtime if image or orl.cpu else None)
    if missing:
        where = f"in the image {image}" if image else "here"
        raise LaunchError(f"the OpenRLHF backend needs the GPU training environment; missing {where}: "
                          f"{', '.join(missing)}. Install the pinned stack ({' '.join(GPU_STACK)}) on a GPU "
                          f"machine (or use the project's GPU environment/container), or train with --backend local.")
    check_logger_modules(config, runtime if image else None, f"in the image {image}" if image else "here")
    # the node and environment settings that would fail the run only at the first weight sync or socket: this
    # process's environment is the script's, which `ray start` and (through apptainer exec) the image inherit
    guards = cpu_applicable_guards(os.environ, config) if orl.cpu else environment_guards(config)
    if failures(guards):
        raise LaunchError("the node's environment would fail this OpenRLHF run (docs/OPENRLHF.md, \"Preflight\"):\n"
                          + failures(guards))
    # a design prompt too long for the engines fails its step hours in: one the run builds at its start is refused
    # here, with the keys that decide it; one its upper bound allows is a warning (spade.rlhf.prompt_budget)
    max_len = data_max_len(config, orl)
    prompt_bounds = check_designer_prompts_fit(config, AutoTokenizer.from_pretrained(model_dir), corpus_path, max_len)
    for line in over_budget(prompt_bounds, max_len):
        print(f"warning: {line}", file=sys.stderr, flush=True)
    argv = openrlhf_command(config, run_dir, model_dir, corpus_path, orl, python=runtime[-1])
    verify_command(argv, runtime)
    prepared = prepare_run(config, run_dir, model_dir, corpus_path, engines=orl.vllm_num_engines)
    groups = dict(flag_groups(argv))
    expected = {"--rollout.batch_size": [str(prepared["rollout_batch_size"])],
                "--rollout.n_samples_per_prompt": [str(prepared["n_samples_per_prompt"])],
                "--train.agent_func_path": [prepared["agent_func_path"]],
                "--data.prompt_dataset": [prepared["prompt_dataset"]]}
    for flag, value in expected.items():
        if groups[flag] != value:
            raise LaunchError(f"{flag} {groups[flag]} differs from what prepare_run wrote ({value})")
    script = atomic_write_text(run_paths(run_dir)["script"],
                               launch_script(config, run_dir, model_dir, corpus_path, orl, image=image,
                                             apptainer_args=apptainer_args))
    extra = {}
    if orl.cpu:
        # the mark every artifact reads (spade.paper.scale): a tiny model standing in for the run's model card
        extra["rehearsal"] = {"model": config.model.name, "launches": rehearse(script, run_dir, orl.cpu_resume_at)}
    else:
        done = subprocess.run(["bash", str(script)])
        if done.returncode != 0:
            raise LaunchError(f"the OpenRLHF run failed (exit status {done.returncode}); script: {script}")
    checkpoints = link_checkpoints(config, run_dir)
    summary = {"run": config.run_name, "model_card": config.model_card, "steps": config.selfplay.total_steps,
               "checkpoints": checkpoints,
               "backend": f"openrlhf {OPENRLHF_VERSION}", "guards": [guard.as_dict() for guard in guards],
               "designer_prompts": {"max_len": max_len, "bounds": [
                   {"what": b.what, "prompt_tokens": b.prompt_tokens, "new_tokens": b.new_tokens,
                    "built": b.built, "over_max_len": b.total > max_len} for b in prompt_bounds]},
               "provenance": stamp(config), **extra}
    atomic_write_json(Path(run_dir) / "summary.json", summary)
    return summary
