"""Evaluate one checkpoint on one benchmark (the ``evaluate`` rule), and select a run's best checkpoint.

``evaluate_checkpoint`` checks the benchmark's data first (a user-data benchmark without its files fails
before any model is loaded), then loads the checkpoint into the Hugging Face backend (a GPU when torch
sees one, else the CPU) and runs ``spade.evals.evaluate``. Its result lands in
``<run>/eval/<benchmark>/step_<NNNNNN>.json`` (path from ``spade.paths``), records beside it.

``select_checkpoint`` implements the paper's checkpoint selection: the step with the best unweighted mean of
the ``benchmark:metric`` values listed in ``eval.select_by`` (the paper: the suite average).
"""

from __future__ import annotations

import json
from pathlib import Path

from spade.config import SpadeConfig
from spade.configtools import ConfigError
from spade.evals.base import EvalContext, EvalRun, evaluate, model_identity
from spade.evals.config import benchmark_sampling
from spade.evals.registry import get_benchmark_class
from spade.provenance import stamp


def make_benchmark(config: SpadeConfig, name: str):
    """The benchmark ``name`` with its config section ``eval.<name>``."""
    cls = get_benchmark_class(name)
    section = getattr(config.eval, name, None)
    if not isinstance(section, cls.config_cls):
        raise ConfigError(f"benchmark {name!r} has no config section 'eval.{name}' of type {cls.config_cls.__name__}")
    return cls(section)


def hf_context(config: SpadeConfig, model_dir: str | Path, benchmark_name: str, batch_size: int) -> EvalContext:
    """An evaluation context over the backend of ``inference.backend``: Hugging Face (a GPU when torch sees one,
    else the CPU) or vLLM (a GPU; spade.inference.generation_vllm)."""
    import torch

    from spade.inference.generation_vllm import build_backend
    from spade.inference.models import load_model
    from spade.sandbox.pool import SandboxPool

    ev = config.eval
    model = tokenizer = None  # sampling settings: context_sampling
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if config.inference.backend == "hf":
        model, tokenizer = load_model(model_dir, device=device)
    backend = build_backend(config.inference, model_dir, model=model, tokenizer=tokenizer, device=device,
                            batch_size=batch_size, max_batch_tokens=ev.max_batch_tokens,
                            rollout_logprobs=config.train.rollout_logprobs)
    return EvalContext(backend, seed=ev.seed, benchmark=benchmark_name, max_context_tokens=ev.max_context_tokens,
                       pool_factory=lambda: SandboxPool(config.sandbox), **context_sampling(ev, benchmark_name))


def context_sampling(ev, benchmark_name: str) -> dict:
    """The EvalContext fields of the benchmark's sampling settings (``eval.sampling``: its own keys or the shared)."""
    settings = benchmark_sampling(ev, benchmark_name)
    return {"temperature": settings["temperature"], "top_p": settings["top_p"], "top_k": settings["top_k"],
            "max_new_tokens": settings["max_new_tokens"], "sampling_source": settings["source"]}


def evaluate_checkpoint(config: SpadeConfig, model_dir: str | Path, step: int, benchmark_name: str,
                        out: str | Path, progress: bool = True) -> dict:
    """Evaluate ``model_dir`` (checkpoint ``step``) on one benchmark into ``out``. With ``eval.<benchmark>.user_serve``
    the user simulator is a server of the base model for the length of the evaluation (spade.evals.user_serve; its
    log beside ``out``)."""
    from spade.evals.user_serve import local_user

    make_benchmark(config, benchmark_name)  # a bad section is refused before any server starts
    with local_user(config, benchmark_name, Path(out).with_suffix(".user_server.log")) as config:
        benchmark = make_benchmark(config, benchmark_name)
        benchmark.check_data()
        ev = config.eval
        ctx = hf_context(config, model_dir, benchmark_name, ev.generation_batch_size)
        spec = EvalRun(run=config.run_name, step=int(step), out=Path(out), batch_size=ev.batch_size,
                       max_items=ev.max_items, provenance={**stamp(config), "model": str(model_dir)},
                       model_identity=model_identity(model_dir))
        return evaluate(benchmark, ctx, spec, progress=progress)


def parse_selector(text: str) -> tuple[str, str]:
    """``"benchmark:metric"`` -> (benchmark, metric); the format of ``eval.select_by`` entries."""
    benchmark, sep, metric = text.partition(":")
    if not sep or not benchmark or not metric:
        raise ConfigError(f"config key 'eval.select_by' entry {text!r} is not 'benchmark:metric' "
                          "(for example 'reasoning_gym_hard:math')")
    return benchmark, metric


def select_checkpoint(values: dict[int, dict[tuple[str, str], float]], selectors: list[str]) -> tuple[int, float]:
    """(step, suite average) of the best checkpoint: the unweighted mean of the selected metrics.

    ``values[step][(benchmark, metric)]`` holds the evaluated values; steps lacking any selected metric are
    skipped; ties go to the earlier step.
    """
    wanted = [parse_selector(s) for s in selectors]
    scored = {step: sum(have[key] for key in wanted) / len(wanted)
              for step, have in values.items() if all(have.get(key) is not None for key in wanted)}
    if not scored:
        raise ConfigError(f"no checkpoint has a value for every metric of 'eval.select_by' ({', '.join(selectors)})")
    best = min(scored, key=lambda step: (-scored[step], step))
    return best, scored[best]


def read_values(paths) -> dict[int, dict[tuple[str, str], float]]:
    """step -> {(benchmark, metric): value} from evaluation result files."""
    values: dict[int, dict] = {}
    for path in paths:
        result = json.loads(Path(path).read_text(encoding="utf-8"))
        for row in result["rows"]:
            values.setdefault(int(row["step"]), {})[(row["benchmark"], row["metric"])] = row["value"]
    return values


def relabel_result(source: str | Path, run: str, out: str | Path) -> dict:
    """Copy one evaluation result (and its item records) to run ``run``: the same model, items, seeds and evaluation
    settings give the same records, so a step-0 result of the base model serves every run that shares them (the
    toy ablations; rules/toy_ablations.smk checks that their evaluation config hashes agree). The rows and the
    result carry the new run name; ``provenance.copied_from`` names the source file, its run and its SHA-256.
    Written atomically, item records first."""
    import hashlib

    from spade.evals.base import items_path
    from spade.io import atomic_write_json, atomic_write_text

    source, out = Path(source), Path(out)
    try:
        text = source.read_text(encoding="utf-8")
        result = json.loads(text)
        rows, original = result["rows"], result["run"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{source}: not an evaluation result with 'run' and 'rows' ({exc})") from None
    records = items_path(source)
    if records.is_file():
        atomic_write_text(items_path(out), records.read_text(encoding="utf-8"))
    result.update(run=run, rows=[{**row, "run": run} for row in rows], items_file=items_path(out).name)
    result["provenance"] = {**result.get("provenance", {}), "copied_from": {
        "path": str(source), "run": original, "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()}}
    atomic_write_json(out, result)
    return result
