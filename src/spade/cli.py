"""The ``spade`` command line.

    spade env validate FILE [--json] [--store-rejected DIR]
    spade env play FILE [--seed N]
    spade env bench [--json]
    spade env check-library [--json] [--out FILE]
    spade eval run --model DIR --step N --benchmark NAME --out FILE
    spade eval list | spade eval select --results FILE... --out FILE | spade eval throughput --model DIR --out FILE
    spade eval relabel --result FILE --run NAME --out FILE
    spade bench step --model DIR --out-dir DIR [--corpus FILE] [--json]
    spade bench gpu --tokenizer DIR --out FILE [--device auto|cpu|cuda] [--shape NAME] [sizes ...]
    spade config schema
    spade compute [RUN_FILE ...] [--json | --markdown] [--assumptions FILE]
    spade serve-designer --model DIR [--host 127.0.0.1] [--port N]
    spade fidelity --model DIR --out FILE [--families NAME ...] [--instances N] [--first-seed N]

Every command accepts ``--config FILE`` (repeatable, merged in order; default ``configs/default.yaml``
when it exists), ``--config KEY=VALUE`` (repeatable: one config key, dotted, its value read as YAML, laid over
the files) and ``--isolation LEVEL`` to override ``sandbox.isolation``.

Size: one module on purpose. Each ``cmd_*`` handler is a thin adapter (load the config, call the package that does
the work, print its result) and ``build_parser`` wires every command to its handler, so the whole command line reads
in one place; split by command group, the one parser would be spread over modules that share nothing but the config
helpers.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from spade.configtools import ConfigError
from spade.provenance import stamp

DEFAULT_CONFIG = Path("configs/default.yaml")


def _config(args):
    """Files of ``--config`` merged in order (default ``configs/default.yaml``), then ``--config-json``, then the
    ``--config KEY=VALUE`` overrides in order, then ``--isolation``; resolved and validated by ``load_config``."""
    from spade.config import load_config
    from spade.configtools import deep_merge, parse_override

    files, settings = [], {}
    for item in args.config or []:
        if "=" in item and not Path(item).exists():  # an existing file whose name holds '=' is still a file
            settings = deep_merge(settings, parse_override(item))
        else:
            files.append(item)
    paths = files or ([DEFAULT_CONFIG] if DEFAULT_CONFIG.is_file() and not args.config_json else [])
    overrides = {}
    if args.config_json:
        try:
            overrides = json.loads(args.config_json)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"--config-json is not valid JSON: {exc}") from None
    overrides = deep_merge(overrides, settings)
    if args.isolation:
        overrides = deep_merge(overrides, {"sandbox": {"isolation": args.isolation}})
    return load_config(*paths, overrides=overrides)


def _pool(config):
    from spade.sandbox.pool import SandboxPool

    return SandboxPool(config.sandbox)


def _read(path: str) -> str:
    file = Path(path)
    if file.is_dir():
        raise ConfigError(f"environment file {path!r} is a directory; give the path of one environment's .py file")
    if not file.is_file():
        raise ConfigError(f"environment file {path!r} does not exist")
    try:
        return file.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ConfigError(f"environment file {path!r} cannot be read: {exc.strerror or exc}") from None


UNREADABLE_INPUT = "unreadable_input"  # validate --json: FILE is missing, a directory or unreadable (no sandbox ran)


def cmd_validate(args) -> int:
    from spade.envs.validate import ValidationReport, Validator, store_rejection

    config = _config(args)
    try:
        raw = _read(args.file)
    except ConfigError as exc:
        if not args.json:
            raise
        # the same verdict schema as a rejected candidate, and the rejection exit code
        print(json.dumps(ValidationReport(False, UNREADABLE_INPUT, str(exc), "none").to_dict(), indent=2))
        return 1
    with _pool(config) as pool:
        report = Validator(pool, config.validation).validate(raw)
    if not report.valid and args.store_rejected:
        store_rejection(args.store_rejected, raw, report)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        status = "VALID" if report.valid else f"REJECTED ({report.reason})"
        print(f"{status}: {report.message}\nisolation: {report.isolation}")
        for change in report.changes:
            print(f"  intake: {change}")
        print(f"  checks passed: {', '.join(report.checks) or 'none'}")
    return 0 if report.valid else 1


def cmd_play(args) -> int:
    try:
        return _play(args)
    except KeyboardInterrupt:  # Ctrl-C: the sandbox has been shut down on the way out; no traceback
        print("\ninterrupted", file=sys.stderr)
        return 130


def _play(args) -> int:
    from spade.envs.drivers import as_action
    from spade.envs.sandboxed import EpisodeFailed, SandboxedEnv

    config = _config(args)
    raw = _read(args.file)
    with _pool(config) as pool, SandboxedEnv.from_source(pool, raw) as env:
        try:
            observation, info = env.reset(args.seed)
        except EpisodeFailed as exc:
            print(f"the environment failed to start: {exc}", file=sys.stderr)
            return 1
        print(f"[{env.class_name}, seed {args.seed}, isolation {pool.level}] type :quit to stop")
        if env.kind == "tool_use":
            for tool in info.get("tools", []):
                function = tool["function"]
                print(f"  tool {function['name']}({', '.join(function['parameters']['properties'])}): {function['description']}")
        else:
            print("  your answer is wrapped in \\boxed{...} for you unless you type it yourself")
        total_turns = 0
        while True:
            print(f"\n{observation}")
            try:
                line = input("> ")
            except EOFError:  # Ctrl-D: end the prompt's line before the shell prints its own
                print()
                return 0
            if line.strip() == ":quit":
                return 0
            try:
                observation, reward, terminated, truncated, info = env.step(as_action(line, env.kind))
            except EpisodeFailed as exc:
                print(f"the environment failed: {exc}", file=sys.stderr)
                return 1
            total_turns += 1
            print(f"  reward {reward:g}  terminated {terminated}  truncated {truncated}")
            if terminated or truncated:
                print(f"\n{observation}\n\nepisode over after {total_turns} turns; final reward {reward:g}")
                return 0


def cmd_bench(args) -> int:
    from spade.sandbox.bench import run_bench

    config = _config(args)
    result = run_bench(config.sandbox, env_name=args.env, steps=args.steps, fresh_calls=args.fresh_calls)
    result["provenance"] = stamp(config)
    if args.out:
        from spade.io import atomic_write_json

        atomic_write_json(args.out, result)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"isolation {result['isolation']}, environment {result['env']}")
        print(f"  step through the sandbox (median)   {result['sandbox_step_ms']:.3f} ms")
        print(f"  same step in-process (lower bound)  {result['inprocess_step_ms']:.4f} ms")
        print(f"  fresh sandboxed process per call    {result['fresh_process_step_ms']:.1f} ms")
        print(f"  speed-up over fresh-process         {result['speedup_vs_fresh_process']:.0f}x")
        print(f"  whole episode, code compiled in it  {result['episode_ms']:.2f} ms")
        print(f"    compiled once by the host         {result['episode_precompiled_ms']:.2f} ms "
              f"({result['precompiled_speedup']:.2f}x, same run)")
        print(f"  validations per second              {result['validations_per_s']:.1f}")
        print(f"    with / without a spare episode    {result['validations_per_s_spare']:.1f} / "
              f"{result['validations_per_s_no_spare']:.1f} ({result['spare_speedup']:.2f}x, same run)")
    return 0


def cmd_check_library(args) -> int:
    from rich.console import Console
    from rich.table import Table

    from spade.envs.library_check import check_library, to_markdown
    from spade.envs.validate import Validator
    from spade.io import atomic_write_json, atomic_write_text

    config = _config(args)
    with _pool(config) as pool:
        rows = check_library(Validator(pool, config.validation), config.library_check, progress=not args.json)
        level = pool.level
    payload = {"isolation": level, "passed": bool(rows) and all(r.passed for r in rows),
               "environments": [r.to_dict() for r in rows], "provenance": stamp(config)}
    if args.out:
        atomic_write_json(args.out, payload)
    if args.markdown:
        atomic_write_text(args.markdown, to_markdown(payload))
    if args.json:
        print(json.dumps(payload, indent=2))
    else:
        table = Table(title=f"built-in library (isolation {level})")
        for column in ("name", "skill", "flavour", "valid", "oracle win", "random win", "random return", "status"):
            table.add_column(column)
        for r in rows:
            table.add_row(r.name, r.skill, r.flavour, str(r.valid), f"{r.oracle_win_rate:.2f}",
                          f"{r.random_win_rate:.2f}", f"{r.random_mean_return:.2f}",
                          "pass" if r.passed else f"FAIL: {r.message}")
        Console().print(table)
    return 0 if payload["passed"] else 1


def cmd_model_prepare(args) -> int:
    from spade.inference.models import prepare_model, verify_model

    config = _config(args)
    folder = prepare_model(config.model, args.out)
    if not args.no_verify:
        reply = verify_model(folder, require_stop=config.model.source != "tiny-random")
        print(f"model {config.model.name} ready in {folder}; it answers: {reply!r}")
    return 0


def cmd_corpus_build(args) -> int:
    from spade.designer.corpus import build_offline_corpus

    config = _config(args)
    kind = "tool_use" if config.selfplay.flavour == "tool_use" else "games"
    if config.corpus.path:
        raise ConfigError(f"config key 'corpus.path' is set ({config.corpus.path!r}): the run uses that corpus; "
                          "the offline corpus is only built when it is empty")
    count = build_offline_corpus(kind, args.out, config.corpus.offline_max_docs, config.seed)
    print(f"wrote {count} {kind} documents to {args.out}")
    return 0


def cmd_bench_step(args) -> int:
    from spade.train.bench_step import render, run_bench_step
    from spade.io import atomic_write_json

    config = _config(args)
    result = run_bench_step(config, args.model, config.corpus.path or args.corpus or None, args.out_dir,
                            prefill_tokens=args.prefill_tokens, decode_context=args.decode_context,
                            decode_tokens=args.decode_tokens, decode_batch=args.decode_batch,
                            train_tokens=args.train_tokens, repeats=args.repeats)
    result["provenance"] = stamp(config)
    atomic_write_json(Path(args.out_dir) / "bench_step.json", result)
    print(json.dumps(result, indent=1, default=str) if args.json else render(result))
    return 0


def cmd_bench_gpu(args) -> int:
    from spade.train.bench_gpu import SECTIONS, SHAPES, render, run_bench_gpu

    config = _config(args)
    sections = [name.strip() for name in args.sections.split(",") if name.strip()]
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown:
        raise ConfigError(f"--sections names {unknown}; allowed: {', '.join(SECTIONS)}")
    for flag, shape in (("--shape", args.shape), ("--step-shape", args.step_shape)):
        if shape not in SHAPES:
            raise ConfigError(f"{flag} is {shape!r}; allowed: {', '.join(SHAPES)}")
    result = run_bench_gpu(config, args.tokenizer, args.out, device=args.device, shape=args.shape,
                           step_shape=args.step_shape, train_samples=args.train_samples, train_tokens=args.train_tokens,
                           micro_batch=args.micro_batch, decode_batch=args.decode_batch,
                           decode_prompt_tokens=args.decode_prompt_tokens, decode_new_tokens=args.decode_new_tokens,
                           decode_calls=args.decode_calls, step_new_tokens=args.step_new_tokens,
                           peak_tflops=args.peak_tflops, bandwidth_tbs=args.bandwidth_tbs, matmul_n=args.matmul_n,
                           probe_mib=args.probe_mib, sections=sections, work_dir=args.work_dir or None, seed=args.seed)
    print(render(result))
    return 1 if result["errors"] else 0


def cmd_train(args) -> int:
    config = _config(args)
    corpus = config.corpus.path or args.corpus
    backend = args.backend
    if backend is None:
        from spade.rlhf.config import resolve_openrlhf

        backend = "openrlhf" if resolve_openrlhf(config).enabled else "local"
    from spade.core.env_source import baseline_of, check_config

    if not args.dry_run:
        check_config(config)  # a missing checkout or endpoint stops here, before any model or GPU is set up
    if backend == "openrlhf":
        from spade.rlhf import launch
        from spade.rlhf.command import LaunchError

        if baseline_of(config).external_serve and not config.openrlhf.cpu:
            raise ConfigError("config key 'baseline.external_serve' starts a local designer server in the local "
                              "trainer only; with --backend openrlhf serve the model yourself (spade serve-designer) "
                              "and set baseline.external_base_url / external_model instead")

        try:
            if args.dry_run:
                print(launch.dry_run(config, args.run_dir, args.model, corpus if config.corpus.enabled else None,
                                     image=args.image, apptainer_args=args.apptainer_args))
                return 0
            summary = launch.launch(config, args.model, corpus if config.corpus.enabled else None, args.run_dir,
                                    image=args.image, apptainer_args=args.apptainer_args)
        except LaunchError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(json.dumps(summary, indent=2))
        return 0
    if args.dry_run:
        raise ConfigError("--dry-run shows the OpenRLHF command: use it with --backend openrlhf "
                          "(the local trainer has nothing to preview)")
    if args.image:  # the workflow passes it to every train job under apptainer; only OpenRLHF's processes use it
        print(f"note: --image {args.image} applies to --backend openrlhf only; the local trainer runs in this Python "
              "environment", file=sys.stderr)
    from spade.train.trainer import train_run

    summary = train_run(config, args.model, corpus if config.corpus.enabled else None, args.run_dir)
    print(json.dumps(summary, indent=2))
    return 0


def cmd_eval(args) -> int:
    from spade.evals.evaluate import evaluate_checkpoint

    config = _config(args)
    result = evaluate_checkpoint(config, args.model, args.step, args.benchmark, args.out)
    for row in result["rows"]:
        print(f"{row['benchmark']} step {row['step']} {row['metric']}: {row['value']} (n = {row['n']})")
    speed = result["throughput"]
    print(f"{speed['items_played']} items played in {speed['seconds']:.1f} s -> {args.out}")
    return 0


def cmd_eval_throughput(args) -> int:
    from spade.evals.throughput import measure
    from spade.evals.evaluate import hf_context, make_benchmark
    from spade.io import atomic_write_json

    config = _config(args)
    settings = config.eval.throughput
    benchmark = make_benchmark(config, settings.benchmark)
    benchmark.check_data()
    report = measure(benchmark, hf_context(config, args.model, settings.benchmark, settings.batch_size), settings)
    report.update(model=str(args.model), provenance=stamp(config))
    atomic_write_json(args.out, report)
    for arm in ("batched", "naive"):
        r = report[arm]
        extra = ""
        if "fraction_of_peak" in r:
            extra = (f", {r['flops_per_s'] / 1e9:.1f} GFLOP/s = {r['fraction_of_peak']:.0%} of the "
                     f"{report['peak_flops_per_s'] / 1e9:.0f} GFLOP/s matmul peak, padding {r['padding_share']:.0%} of slots")
        print(f"{arm:8s} {r['items']} items in {r['seconds']:.1f} s: {r['items_per_s']:.3f} items/s, "
              f"{r['tokens_per_s']:.1f} generated tokens/s{extra}")
    print(f"batched / naive: {report['speedup_items_per_s']:.2f}x items/s, {report['speedup_tokens_per_s']:.2f}x "
          f"tokens/s; identical responses {report['identical_responses']:.2f} -> {args.out}")
    return 0


def cmd_eval_list(args) -> int:
    from spade.evals.registry import registry

    for name, cls in sorted(registry().items()):
        summary = (sys.modules[cls.__module__].__doc__ or "").strip().splitlines() or [""]
        print(f"{name:22s} {'offline' if cls.offline else 'user data':9s}  {summary[0]}")
    return 0


def cmd_eval_select(args) -> int:
    from spade.evals.evaluate import read_values, select_checkpoint
    from spade.io import atomic_write_json

    config = _config(args)
    step, average = select_checkpoint(read_values(args.results), list(config.eval.select_by))
    atomic_write_json(args.out, {"run": config.run_name, "step": step, "suite_average": average,
                                 "select_by": list(config.eval.select_by), "inputs": sorted(map(str, args.results)),
                                 "provenance": stamp(config)})
    print(f"best checkpoint of {config.run_name}: step {step} (suite average {average:.4f}) -> {args.out}")
    return 0


def cmd_eval_relabel(args) -> int:
    from spade.evals.evaluate import relabel_result

    try:
        result = relabel_result(args.result, args.run, args.out)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    print(f"{args.result} (run {result['provenance']['copied_from']['run']}) -> {args.out} (run {args.run})")
    return 0


def cmd_fidelity(args) -> int:
    from spade.designer.fidelity import designer_backend, fidelity_config, run_fidelity, summary_lines
    from spade.io import atomic_write_json

    config = _config(args)
    settings = fidelity_config(families=args.families, instances=args.instances, first_seed=args.first_seed)
    backend = designer_backend(config, args.model)
    with _pool(config) as pool:
        report = run_fidelity(config, backend, pool, settings, progress=True, model=str(args.model))
    atomic_write_json(args.out, report)
    print("\n".join(summary_lines(report)) + f"\n-> {args.out}")
    return 0


def cmd_check_rlve(args) -> int:
    from spade.core.env_source import check_config
    from spade.core.rlve import check_rlve
    from spade.envs.validate import Validator
    from spade.io import atomic_write_json

    config = _config(args)
    check_config(config)  # the checkout and the sandbox's view of it
    with _pool(config) as pool:
        report = check_rlve(config, Validator(pool, config.validation), args.every, tuple(args.levels), progress=True)
        report["isolation"] = pool.level
    report["provenance"] = stamp(config)
    if args.out:
        atomic_write_json(args.out, report)
    for level, counts in report["counts"].items():
        print(f"top difficulty {level}: " + ", ".join(f"{reason} {n}" for reason, n in sorted(counts.items())))
    for row in report["failed"][:20]:
        print(f"  {row['identifier']} (level {row['level']}): {row['reason']}: {row['message'][:200]}")
    return 0 if not report["failed"] else 1


def cmd_serve_designer(args) -> int:
    from spade.designer.serve import serve

    logging.getLogger().setLevel(logging.INFO)  # the server's log is the run's designer_server.log
    try:
        serve(args.model, args.host, args.port, args.name, args.max_tokens, args.seed, args.device, args.ready_file,
              args.exit_with_parent, args.context, args.reply_prefix)
    except (FileNotFoundError, OSError) as exc:  # no prepared model there, or the port is taken
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def cmd_schema(args) -> int:
    from spade.config import SpadeConfig
    from spade.configtools import describe

    for key, default, help_text in describe(SpadeConfig):
        print(f"{key} = {default!r}\n    {help_text}")
    return 0


def cmd_prompt_budget(args) -> int:
    """The designer prompts of a run against its --data.max_len, as the OpenRLHF launcher checks them before it starts
    (spade.rlhf.prompt_budget): a prompt built at the start over it is an error (exit 2), an upper bound a warning."""
    from transformers import AutoTokenizer

    from spade.rlhf.config import resolve_openrlhf
    from spade.rlhf.placement import data_max_len
    from spade.rlhf.prompt_budget import check_designer_prompts_fit, over_budget

    config = _config(args)
    max_len = data_max_len(config, resolve_openrlhf(config))
    corpus = (config.corpus.path or args.corpus) if config.corpus.enabled else None
    bounds = check_designer_prompts_fit(config, AutoTokenizer.from_pretrained(args.model), corpus, max_len)
    print(f"{config.run_name}: --data.max_len {max_len}" + ("" if bounds else "; the policy designs nothing"))
    for bound in bounds:
        built = f"built at the start {bound.built + bound.new_tokens}, " if bound.built is not None else ""
        print(f"  {bound.what}: {built}upper bound {bound.total} ({bound.prompt_tokens} + {bound.new_tokens} new)")
    for line in over_budget(bounds, max_len):
        print(f"warning: {line}", file=sys.stderr)
    return 0


def cmd_compute(args) -> int:
    from spade.train.compute import COMPONENTS, estimate, load_assumptions, table_rows, to_markdown, HEADER
    from spade.config import load_config

    assumptions = load_assumptions(args.assumptions)
    configs = [load_config(path) for path in args.runs] if args.runs else [_config(args)]
    estimates = [estimate(config, assumptions, args.assumptions) for config in configs]
    if args.json:
        print(json.dumps([e.to_dict() for e in estimates], indent=2))
    elif args.markdown:
        print(to_markdown(estimates), end="")
    else:
        from rich.console import Console
        from rich.table import Table

        table = Table(title=f"ROUGH GPU-hour estimate ({assumptions['hardware'].get('gpu', '')}; assumptions: "
                            f"{args.assumptions}; not a measurement)")
        for column in HEADER:
            table.add_column(column, justify="left" if column in ("run", "model") else "right")
        for row in table_rows(estimates):
            table.add_row(*row)
        Console().print(table)
        print(f"components: {', '.join(COMPONENTS)} (GPU-hours); formulas: `python -c \"import spade.train.compute; "
              "help(spade.train.compute)\"`")
    return 0


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", action="append", metavar="FILE|KEY=VALUE",
                        help="YAML config file (repeatable; merged in order), or one config key's value, e.g. "
                             "train.learning_rate=1.0e-5 (value read as YAML; repeatable; laid over the files)")
    common.add_argument("--config-json", help="a whole config as JSON, merged after --config files (the workflow "
                                              "passes a config file with --config instead)")
    common.add_argument("--isolation", choices=("auto", "rlimits", "unshare", "bwrap"), help="override sandbox.isolation")
    common.add_argument("-v", "--verbose", action="store_true", help="log sandbox decisions")

    parser = argparse.ArgumentParser(prog="spade", description="SPADE reproduction tools")
    groups = parser.add_subparsers(dest="group", required=True)
    env = groups.add_parser("env", help="generated environments: validate, play, benchmark").add_subparsers(
        dest="command", required=True
    )
    validate = env.add_parser("validate", parents=[common], help="validate one environment file")
    validate.add_argument("file")
    validate.add_argument("--json", action="store_true")
    validate.add_argument("--store-rejected", metavar="DIR", help="keep a rejected candidate and its report here")
    validate.set_defaults(func=cmd_validate)

    play = env.add_parser("play", parents=[common], help="play an environment in the terminal")
    play.add_argument("file")
    play.add_argument("--seed", type=int, default=0)
    play.set_defaults(func=cmd_play)

    bench = env.add_parser("bench", parents=[common], help="sandbox step cost vs in-process and fresh process")
    bench.add_argument("--json", action="store_true")
    bench.add_argument("--env", default="", help="library environment to step (default: the first game)")
    bench.add_argument("--steps", type=int, default=2000)
    bench.add_argument("--fresh-calls", type=int, default=30)
    bench.add_argument("--out", help="also write the JSON result to this file (atomically)")
    bench.set_defaults(func=cmd_bench)

    check = env.add_parser("check-library", parents=[common], help="validate and replay the built-in library")
    check.add_argument("--json", action="store_true")
    check.add_argument("--out", help="also write the JSON report to this file (atomically)")
    check.add_argument("--markdown", help="also write a Markdown table to this file (atomically)")
    check.set_defaults(func=cmd_check_library)

    rlve = env.add_parser("check-rlve", parents=[common], help="validate an RLVE checkout's environments in the "
                          "sandbox, as a baseline.mode rlve run renders them")
    rlve.add_argument("--every", type=int, default=1, help="check every N-th environment (default: all)")
    rlve.add_argument("--levels", type=int, nargs="+", default=[0], help="top difficulties to render (default: 0)")
    rlve.add_argument("--out", help="also write the JSON report to this file (atomically)")
    rlve.set_defaults(func=cmd_check_rlve)

    model = groups.add_parser("model", help="models").add_subparsers(dest="command", required=True)
    prepare = model.add_parser("prepare", parents=[common], help="prepare config.model as a local HF folder")
    prepare.add_argument("--out", required=True)
    prepare.add_argument("--no-verify", action="store_true", help="skip the chat check")
    prepare.set_defaults(func=cmd_model_prepare)

    corpus = groups.add_parser("corpus", help="grounding corpora").add_subparsers(dest="command", required=True)
    build = corpus.add_parser("build", parents=[common], help="build the offline corpus from shipped docstrings")
    build.add_argument("--out", required=True)
    build.set_defaults(func=cmd_corpus_build)

    train = groups.add_parser("train", parents=[common],
                              help="run (or resume) self-play training: locally, or on GPUs through OpenRLHF")
    train.add_argument("--model", required=True, help="prepared model folder")
    train.add_argument("--corpus", default="", help="corpus JSONL (ignored when corpus.path is set)")
    train.add_argument("--run-dir", required=True)
    train.add_argument("--backend", choices=("local", "openrlhf"), default=None,
                       help="local trainer or OpenRLHF (Ray + vLLM + DeepSpeed); default: openrlhf.enabled")
    train.add_argument("--dry-run", action="store_true",
                       help="print the OpenRLHF placement, command and launch script; start and write nothing")
    train.add_argument("--image", default="",
                       help="OpenRLHF backend: an Apptainer image (.sif) with the GPU stack; Ray and the driver run "
                            "in it on every node (apptainer exec), srun runs on the host (docs/CONTAINERS.md)")
    train.add_argument("--apptainer-args", default="--nv",
                       help="flags of every `apptainer exec` with --image (default: --nv, the host's NVIDIA GPUs)")
    train.set_defaults(func=cmd_train)

    performance = groups.add_parser("bench", help="performance: where a training step's time goes").add_subparsers(
        dest="command", required=True)
    step_bench = performance.add_parser("step", parents=[common],
                            help="one step's phase profile without and with the prefix cache, and the achieved "
                                 "FLOP/s of prefill, decode and training against this machine's matmul peak")
    step_bench.add_argument("--model", required=True, help="prepared model folder (e.g. results/models/smollm2-135m)")
    step_bench.add_argument("--corpus", default="", help="corpus JSONL (e.g. results/corpus/games.jsonl)")
    step_bench.add_argument("--out-dir", required=True, help="folder for the two one-step runs and bench_step.json")
    step_bench.add_argument("--prefill-tokens", type=int, default=1500, help="prompt length of the prefill kernel")
    step_bench.add_argument("--decode-context", type=int, default=1500, help="context before the decode kernel's tokens")
    step_bench.add_argument("--decode-tokens", type=int, default=32, help="new tokens of the decode kernel")
    step_bench.add_argument("--decode-batch", type=int, default=8, help="rows of the decode kernel")
    step_bench.add_argument("--train-tokens", type=int, default=512, help="sequence length of the training kernel")
    step_bench.add_argument("--repeats", type=int, default=3, help="each kernel is timed as the best of this many")
    step_bench.add_argument("--json", action="store_true", help="print the JSON result instead of the text table")
    step_bench.set_defaults(func=cmd_bench_step)
    gpu_bench = performance.add_parser(
        "gpu", parents=[common], help="the local backend on one GPU with random weights of a real shape: a whole "
        "self-play step (straight and resumed), the trainer's MFU, decode ms/step over new-shape calls with a profile "
        "(spade.train.bench_gpu); every size is a flag, so a tiny shape runs on a CPU")
    gpu_bench.add_argument("--tokenizer", required=True, help="folder of a tokenizer (e.g. a prepared model folder); "
                                                              "its vocabulary sizes the random models")
    gpu_bench.add_argument("--out", required=True, help="JSON result, rewritten after every section")
    gpu_bench.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                           help="train.device of every section (auto: cuda when torch sees one)")
    gpu_bench.add_argument("--shape", default="smollm2-1.7b", help="model shape of train and decode (spade.train."
                                                                   "bench_gpu.SHAPES: smollm2-1.7b, qwen3-1.7b, "
                                                                   "smollm2-135m, tiny)")
    gpu_bench.add_argument("--step-shape", default="smollm2-135m", help="model shape of the self-play step (written "
                                                                        "to disk with its checkpoints)")
    gpu_bench.add_argument("--sections", default="probes,train,decode,step", help="comma-separated subset to run")
    gpu_bench.add_argument("--train-samples", type=int, default=192, help="sequences of the timed update")
    gpu_bench.add_argument("--train-tokens", type=int, default=1280, help="tokens per training sequence")
    gpu_bench.add_argument("--micro-batch", type=int, default=8, help="sequences per forward/backward pass")
    gpu_bench.add_argument("--decode-batch", type=int, default=192, help="rows of every decode call")
    gpu_bench.add_argument("--decode-prompt-tokens", type=int, default=1024,
                           help="longest prompt; each call draws rows of 3/4 to 1 times it")
    gpu_bench.add_argument("--decode-new-tokens", type=int, default=96, help="tokens sampled per row and call")
    gpu_bench.add_argument("--decode-calls", type=int, default=4, help="new-shape calls before the repeated one")
    gpu_bench.add_argument("--step-new-tokens", type=int, default=64, help="designer, hint and agent tokens per "
                                                                           "generation in the self-play step")
    gpu_bench.add_argument("--peak-tflops", type=float, default=0.0,
                           help="peak of the MFU (default: the device's datasheet bf16 peak, else the measured matmul)")
    gpu_bench.add_argument("--bandwidth-tbs", type=float, default=0.0,
                           help="bandwidth of the decode floor in TB/s (default: datasheet, else the measured copy)")
    gpu_bench.add_argument("--matmul-n", type=int, default=8192, help="size of the matmul probe")
    gpu_bench.add_argument("--probe-mib", type=int, default=1024, help="size of the copy-bandwidth probe")
    gpu_bench.add_argument("--work-dir", default="", help="folder for the model and step runs (default: a temporary "
                                                          "one, removed at the end)")
    gpu_bench.add_argument("--seed", type=int, default=0, help="seed of the random weights, prompts and samples")
    gpu_bench.set_defaults(func=cmd_bench_gpu)

    evals = groups.add_parser("eval", help="benchmarks: run one, list them, select a checkpoint").add_subparsers(
        dest="command", required=True)
    run_eval = evals.add_parser("run", parents=[common], help="evaluate one checkpoint on one benchmark")
    run_eval.add_argument("--model", required=True, help="model or checkpoint folder")
    run_eval.add_argument("--step", type=int, required=True, help="training step of the checkpoint (0 = base model)")
    run_eval.add_argument("--benchmark", required=True, help="a registered benchmark (see `spade eval list`)")
    run_eval.add_argument("--out", required=True, help="result JSON; item records go beside it")
    run_eval.set_defaults(func=cmd_eval)
    speed = evals.add_parser("throughput", parents=[common], help="batched vs one-item-at-a-time evaluation speed")
    speed.add_argument("--model", required=True, help="model or checkpoint folder")
    speed.add_argument("--out", required=True, help="JSON report to write")
    speed.set_defaults(func=cmd_eval_throughput)
    listing = evals.add_parser("list", help="the registered benchmarks")
    listing.set_defaults(func=cmd_eval_list)
    select = evals.add_parser("select", parents=[common], help="the best checkpoint by eval.select_by")
    select.add_argument("--results", nargs="+", required=True, help="evaluation result JSON files of the run")
    select.add_argument("--out", required=True)
    select.set_defaults(func=cmd_eval_select)
    relabel = evals.add_parser("relabel", help="copy a result to another run that shares its model, items and "
                               "settings (a toy ablation's step 0)")
    relabel.add_argument("--result", required=True, help="evaluation result JSON (its item records are copied too)")
    relabel.add_argument("--run", required=True, help="run name the copy is written for")
    relabel.add_argument("--out", required=True, help="result JSON to write")
    relabel.set_defaults(func=cmd_eval_relabel)

    config = groups.add_parser("config", help="configuration").add_subparsers(dest="command", required=True)
    schema = config.add_parser("schema", help="list every config key with its default and description")
    schema.set_defaults(func=cmd_schema)

    from spade.train.compute import COMPUTE_FILE

    compute = groups.add_parser("compute", parents=[common], help="rough GPU-hours of runs from their configs")
    compute.add_argument("runs", nargs="*", help="run files, each estimated on its own (default: the --config merge)")
    compute.add_argument("--assumptions", default=str(COMPUTE_FILE), help="assumptions file (default: %(default)s)")
    output = compute.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print the estimates with every count as JSON")
    output.add_argument("--markdown", action="store_true", help="print a Markdown table")
    compute.set_defaults(func=cmd_compute)

    budget = groups.add_parser("prompt-budget", parents=[common], help="a run's designer prompts against its "
                               "--data.max_len, as the OpenRLHF launcher checks them")
    budget.add_argument("--model", required=True, help="model folder whose tokenizer and chat template the run uses")
    budget.add_argument("--corpus", default="", help="the run's corpus (JSONL; default: corpus.path)")
    budget.set_defaults(func=cmd_prompt_budget)

    fidelity = groups.add_parser("fidelity", parents=[common],
                                 help="designer fidelity: implement solved mechanisms from theta, replay the reference")
    fidelity.add_argument("--model", required=True, help="model or checkpoint folder (the designer)")
    fidelity.add_argument("--out", required=True, help="JSON report to write (atomically)")
    fidelity.add_argument("--families", nargs="+", help="mechanism families (default: all registered)")
    fidelity.add_argument("--instances", type=int, help="instances per family (default 1)")
    fidelity.add_argument("--first-seed", type=int, help="sampler seed of the first instance (default 20000)")
    fidelity.set_defaults(func=cmd_fidelity)

    served = groups.add_parser("serve-designer", help="an OpenAI-compatible chat-completions server over a prepared "
                               "model (the toy stand-in for the fixed external designer)")
    served.add_argument("--model", required=True, help="prepared model folder (served frozen)")
    served.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    served.add_argument("--port", type=int, default=8000, help="port (0 = a free one, see --ready-file)")
    served.add_argument("--name", default="", help="model name to announce (default: local-<folder name>)")
    served.add_argument("--max-tokens", type=int, default=1024, help="token limit of requests that give none")
    served.add_argument("--seed", type=int, default=0, help="seeds the requests that carry no seed")
    served.add_argument("--device", default="cpu", help="torch device of the model")
    served.add_argument("--context", type=int, default=-1, help="refuse prompt + max_tokens above this many tokens "
                        "(-1 = the model's max_position_embeddings, 0 = no check)")
    served.add_argument("--ready-file", default="", help="write host, port and base_url here (JSON) once bound")
    served.add_argument("--exit-with-parent", action="store_true", help="stop when the starting process is gone")
    served.add_argument("--reply-prefix", default="", help="open every reply with this text (its tokens end the "
                        "prompt, the reply's content starts with it): designer.response_prefix of a run whose "
                        "baseline.external_serve starts this server")
    served.set_defaults(func=cmd_serve_designer)
    return parser


def main(argv: list | None = None) -> int:
    args = build_parser().parse_args(argv)
    pipeline_stage = args.group in ("model", "corpus", "train", "eval", "fidelity")  # their logs are the rule logs
    logging.basicConfig(level=logging.INFO if getattr(args, "verbose", False) or pipeline_stage else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    from spade.envs.intake import IntakeError
    from spade.sandbox.isolation import IsolationError

    try:
        return args.func(args)
    except (ConfigError, IsolationError, IntakeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
