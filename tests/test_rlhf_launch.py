"""The OpenRLHF launcher (spade.rlhf.launch, .command, .script) against OpenRLHF 0.11.2's own argument parser.

``probe_parser`` executes the installed ``openrlhf/cli/train_ppo_ray.py`` as ``__main__`` in a subprocess with
ray, vLLM and the Ray actor modules stubbed: OpenRLHF's code builds its parser, argparse parses our argv, the
script's post-parse checks run, and the run stops at the first line of ``train()``. Each command is also
compared flag by flag with the parser's table (exact names, number of values, choices).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("openrlhf", reason="openrlhf is not installed (pip install --no-deps openrlhf==0.11.2)")

from spade.cli import main  # noqa: E402
from spade.config import CONFIG_DIR, load_config  # noqa: E402
from spade.configtools import ConfigError, from_dict  # noqa: E402
from spade.rlhf.command import (AGENT_FUNC_PATH, OPENRLHF_VERSION, WANDB_KEY, LaunchError, check_command,  # noqa: E402
                                flag_groups, openrlhf_command, probe_parser, run_paths, shell_command, verify_command)
from spade.rlhf.config import OpenRLHFConfig, load_preset, resolve_openrlhf  # noqa: E402
from spade.rlhf.launch import dry_run, link_checkpoints, missing_gpu_modules, prepare_run  # noqa: E402
from spade.rlhf.placement import placement  # noqa: E402
from spade.rlhf.plan import ticket_plan  # noqa: E402
from spade.rlhf.script import launch_script  # noqa: E402

PAPER_RUNS = sorted((CONFIG_DIR / "paper").glob("*.yaml"))
TOY_OVERRIDES = {"seed": 7, "train": {"kl_coef": 0.01}}


def small_orl(**changes) -> OpenRLHFConfig:
    values = dict(enabled=True, num_nodes=1, gpus_per_node=2, actor_num_nodes=1, actor_num_gpus_per_node=2,
                  ref_num_nodes=1, ref_num_gpus_per_node=2, vllm_num_engines=2, vllm_tensor_parallel_size=1,
                  vllm_gpu_memory_utilization=0.5, colocate_all_models=True, zero_stage=2, gradient_checkpointing=False,
                  packing_samples=False, attn_implementation="sdpa", max_len=4096,
                  extra_args=["--ds.experts_implementation", "eager"])
    values.update(changes)
    return from_dict(OpenRLHFConfig, values, "openrlhf")


@pytest.fixture(scope="module")
def toy():
    return load_config(CONFIG_DIR / "default.yaml", overrides=TOY_OVERRIDES)


@pytest.fixture(scope="module")
def paper():
    """Every paper run: (name, config, argv), and one parser probe over all of them."""
    runs = []
    for path in PAPER_RUNS:
        config = load_config(path)
        argv = openrlhf_command(config, f"/scratch/runs/{config.run_name}", f"/scratch/models/{config.model.name}",
                                "/scratch/corpus.jsonl")
        runs.append((path.stem, config, argv))
    return runs, probe_parser([argv for _, _, argv in runs])


def test_hand_written_command_for_a_small_config(toy, tmp_path):
    # toy: 2 active skills x 1 env = 2 slots, global batch 8 -> 2 tickets of 8 / 2 = 4 responses ('global_batch':
    # one global batch per rollout; designer packs take slot tickets); KL 0.01 > 0 -> reference on the actor's GPUs
    run, model = tmp_path / "run", tmp_path / "model"
    argv = openrlhf_command(toy, run, model, "corpus.jsonl", small_orl(), python="py")
    expected = [
        "py", "-m", "openrlhf.cli.train_ppo_ray",
        "--actor.num_nodes", "1", "--actor.num_gpus_per_node", "2", "--ref.num_nodes", "1", "--ref.num_gpus_per_node", "2",
        "--vllm.num_engines", "2", "--vllm.tensor_parallel_size", "1", "--vllm.gpu_memory_utilization", "0.5",
        "--vllm.enable_prefix_caching", "--train.colocate_all", "--vllm.enable_sleep", "--ds.enable_sleep",
        "--ds.zero_stage", "2", "--ds.param_dtype", "bf16", "--ds.attn_implementation", "sdpa",
        "--actor.model_name_or_path", str(model), "--train.agent_func_path", str(AGENT_FUNC_PATH),
        "--data.prompt_dataset", str(run / "tickets.jsonl"), "--data.input_key", "prompt", "--data.label_key", "label",
        "--data.max_len", "4096",
        "--rollout.batch_size", "2", "--rollout.n_samples_per_prompt", "4", "--rollout.micro_batch_size", "1",
        # log-probs at T 1.0 (train.logprob_temperature, reference); the executor samples at agent.temperature 0.6
        "--rollout.temperature", "1.0", "--rollout.top_p", "0.95",  # the games recipe (reference)
        "--algo.advantage.estimator", "dr_grpo", "--reward.clip_range", "-1000", "1000",
        "--algo.advantage.is_correction_level", "token", "--algo.advantage.is_correction_mode", "clip",
        "--algo.advantage.is_correction_gating", "ratio", "--algo.advantage.is_correction_threshold", "0", "2.0",
        "--actor.policy_loss_type", "ppo", "--actor.loss_agg_mode", "seq-mean-token-mean",  # the reference's
        "--actor.eps_clip_low_high", "0.2", "0.28",
        "--algo.kl.init_coef", "0.01", "--algo.kl.use_loss", "--algo.kl.estimator", "k3",
        "--actor.adam.lr", "1e-05", "--actor.adam.betas", "0.9", "0.98", "--actor.adam.weight_decay", "0.1",
        "--actor.lr_scheduler", "constant", "--actor.lr_warmup_ratio", "0", "--actor.max_norm", "1.0",
        "--train.batch_size", "8", "--train.micro_batch_size", "1", "--train.max_epochs", "1", "--train.num_episodes", "1",
        "--train.seed", "7",
        "--ckpt.path", str(run / "openrlhf" / "ckpt"), "--ckpt.save_steps", "2", "--ckpt.save_hf", "--ckpt.max_num", "2",
        "--ckpt.load_enable", "--ckpt.output_dir", str(run / "openrlhf" / "final"),
        "--logger.logging_steps", "1", "--logger.tensorboard_dir", str(run / "openrlhf" / "tensorboard"),
        # always named after the run (TensorBoard folder <tensorboard_dir>/toy); no wandb key/project without
        # openrlhf.wandb_project
        "--logger.wandb.run_name", "toy",
        "--ds.experts_implementation", "eager",
    ]
    assert argv == expected
    wandb = openrlhf_command(toy, run, model, "corpus.jsonl", small_orl(wandb_project="spade"), python="py")
    at = wandb.index("--logger.wandb.run_name")  # the key stays a shell expansion, then the project
    assert wandb[at:at + 6] == ["--logger.wandb.run_name", "toy", "--logger.wandb.key", WANDB_KEY,
                                "--logger.wandb.project", "spade"]
    assert wandb[:at] == argv[:at] and wandb[at + 6:] == argv[at + 2:]
    table = probe_parser([argv])
    assert table["version"] == OPENRLHF_VERSION
    assert check_command(argv, table, table["results"][0]) == []
    parsed = table["results"][0]["parsed"]
    assert parsed["rollout"]["batch_size"] == 2 and parsed["actor"]["eps_clip_low_high"] == [0.2, 0.28]
    assert parsed["reward"]["clip_range"] == [-1000.0, 1000.0]
    assert parsed["reward"]["remote_url"] == ["agent"]  # set by the script itself for an agent_func_path


def test_every_paper_command_passes_openrlhf_parser(paper):
    runs, table = paper
    assert table["version"] == OPENRLHF_VERSION
    assert len(runs) == len(PAPER_RUNS) >= 11
    for (name, _, argv), result in zip(runs, table["results"]):
        assert check_command(argv, table, result) == [], name
        assert result["parsed"] is not None, name
    assert "dr_grpo" in table["flags"]["--algo.advantage.estimator"]["choices"]
    assert "token" in table["flags"]["--algo.advantage.is_correction_level"]["choices"]
    assert "k3" in table["flags"]["--algo.kl.estimator"]["choices"]


def test_paper_values_and_per_model_exceptions_reach_the_command(paper):
    runs, table = paper
    seen = set()
    for (name, config, _), result in zip(runs, table["results"]):
        args = result["parsed"]
        card = config.model_card
        seen.add(card)
        # Table 5, read back from OpenRLHF's own parse of the command
        assert args["actor"]["adam"]["lr"] == 1e-6 and args["actor"]["adam"]["betas"] == [0.9, 0.98], name
        assert args["actor"]["adam"]["weight_decay"] == 0.1 and args["actor"]["lr_scheduler"] == "constant", name
        assert args["actor"]["eps_clip_low_high"] == [0.2, 0.28], name
        # one global batch per rollout (selfplay.batch_structure 'global_batch', the reference's): 24 tickets x
        # 192 / 24 = 8 responses = 192 = --train.batch_size, so every rollout is exactly one optimizer step. The
        # Fixed-env RLVE runs follow the reference's RLVE scripts (issue 32): 16 tickets x 16 = 256, temperature 1.0,
        # KL 0 on every backbone
        rlve = config.baseline.mode == "rlve"
        batch, tickets, n, temperature = (256, 16, 16, 1.0) if rlve else (192, 24, 8, 0.6)
        assert config.selfplay.batch_structure == "global_batch", name
        assert args["train"]["batch_size"] == batch and args["rollout"]["n_samples_per_prompt"] == n, name
        assert args["rollout"]["batch_size"] * args["rollout"]["n_samples_per_prompt"] == batch, name
        # OpenRLHF's actor takes log-probs at --rollout.temperature: the reference's 1.0 (train.logprob_temperature;
        # its tool-use 4B script's 0.7, issue 40); the plugin samples each request at agent.temperature (0.6; 1.0 in
        # the RLVE runs)
        logprob_t = 0.7 if name == "spade_tool_use_4b" else 1.0
        assert args["rollout"]["temperature"] == logprob_t and config.agent.temperature == temperature, name
        assert args["algo"]["advantage"]["estimator"] == "dr_grpo", name
        assert args["algo"]["advantage"]["is_correction_threshold"] == [0.0, 2.0], name
        # every paper run keeps a checkpoint every 16 steps (their run files; recipe: 50), as the reference scripts
        assert args["ckpt"]["save_steps"] == 16, name
        assert args["train"]["seed"] == 0, name
        # designer packs take slot tickets, one (set, skill) advantage group per ceil(size / 8) packs of 8; 400 steps
        # with k = 4 or 8: (400 - 1) % k != 0, so the last step closes one set. 3 skills x 8 envs: 3 x ceil(8 / 8)
        # = 3 packs; two skills x 12 envs: 2 x ceil(12 / 8) = 4; the calibration reward trains invalid designs too:
        # 8 envs x 5 attempts = 40 per skill -> 3 x ceil(40 / 8) = 15 packs, still within the 24 tickets
        plan = ticket_plan(config)
        packs = (0 if not config.selfplay.train_designer else 15 if config.designer.reward == "calibration"
                 else 4 if config.selfplay.active_skills == 2 else 3)
        steps = 500 if name == "spade_tool_use_4b" else 400  # the tool-use 4B script's --num-rollout (issue 40)
        assert (config.selfplay.active_skills * config.selfplay.envs_per_skill, config.selfplay.total_steps) == (24, steps)
        assert (plan.tickets_per_step, plan.designer_packs, plan.responses_per_step) == (tickets, packs, batch), name
        if card == "qwen3-8b" and not rlve:  # KL 0.005 with a k3 loss against a reference; designer 20,000 tokens
            assert args["algo"]["kl"]["init_coef"] == 0.005 and args["algo"]["kl"]["use_loss"], name
            assert args["algo"]["kl"]["estimator"] == "k3", name
            assert args["data"]["max_len"] == 16384 + 20000, name
        else:
            assert args["algo"]["kl"]["init_coef"] == 0.0 and not args["algo"]["kl"]["use_loss"], name
            assert args["data"]["max_len"] == (16384 + 20000 if card == "qwen3-8b" else 32768), name
        if card == "qwen3-30b-a3b-instruct-2507":
            assert (args["actor"]["num_nodes"], args["actor"]["num_gpus_per_node"]) == (2, 8), name
            assert (args["vllm"]["num_engines"], args["vllm"]["tensor_parallel_size"]) == (4, 4), name
        else:
            assert (args["actor"]["num_nodes"], args["actor"]["num_gpus_per_node"]) == (1, 8), name
            assert (args["vllm"]["num_engines"], args["vllm"]["tensor_parallel_size"]) == (8, 1), name
        assert args["train"]["colocate_all"] and args["vllm"]["enable_sleep"], name
    assert seen == {"qwen3-4b-instruct-2507", "qwen3-8b", "qwen3-30b-a3b-instruct-2507"}


def test_parser_check_catches_what_argparse_lets_through(toy, tmp_path):
    argv = openrlhf_command(toy, tmp_path, tmp_path, "c.jsonl", small_orl())
    abbreviated = argv + ["--train.agent_func", "x.py"]  # argparse accepts the abbreviation
    short = list(argv)
    del short[short.index("--actor.eps_clip_low_high") + 2]
    renamed = [("--rollout_batch_size" if t == "--rollout.batch_size" else t) for t in argv]  # the old flat name
    group1 = list(argv)
    group1[group1.index("--rollout.n_samples_per_prompt") + 1] = "1"
    table = probe_parser([abbreviated, short, renamed, group1])
    r = table["results"]
    assert r[0]["error"] is None
    assert check_command(abbreviated, table, r[0]) == [
        f"--train.agent_func is not a flag of OpenRLHF 0.11.2 ({table['source']})"]
    assert any("takes nargs=2" in p and "gets 1" in p for p in check_command(short, table, r[1]))
    assert any("--rollout_batch_size is not a flag" in p for p in check_command(renamed, table, r[2]))
    assert "dr_grpo requires n_samples_per_prompt > 1" in r[3]["error"]


def test_extra_args_are_validated(toy, tmp_path):
    with pytest.raises(ConfigError, match="--train.async_enable, which must stay off"):
        openrlhf_command(toy, tmp_path, tmp_path, "c", small_orl(extra_args=["--train.async_enable"]))
    with pytest.raises(ConfigError, match=r"repeats --actor.adam.lr, which is set from train.learning_rate"):
        openrlhf_command(toy, tmp_path, tmp_path, "c", small_orl(extra_args=["--actor.adam.lr", "1e-3"]))
    with pytest.raises(ConfigError, match="must start with a flag"):
        small_orl(extra_args=["grouped_mm"])
    unknown = openrlhf_command(toy, tmp_path, tmp_path, "c", small_orl(extra_args=["--ds.no_such_flag", "1"]))
    with pytest.raises(LaunchError, match="--ds.no_such_flag is not a flag"):
        verify_command(unknown)


def test_placement_rules(toy):
    place = placement(toy, small_orl())
    assert (place["actor"]["gpus"], place["ref"]["gpus"], place["vllm"]["gpus"], place["gpus_used"]) == (2, 2, 2, 2)
    assert place["responses_per_step"] == 8 and not place["notes"]  # exactly one global batch of 8
    with pytest.raises(ConfigError, match=r"2 x 1 = 2\) must equal the actor's GPUs \(1\)"):
        placement(toy, small_orl(actor_num_gpus_per_node=1, ref_num_gpus_per_node=1))
    with pytest.raises(ConfigError, match="ref_num_nodes'/'ref_num_gpus_per_node' \\(1 x 1\\)"):
        placement(toy, small_orl(ref_num_gpus_per_node=1))
    # separate GPUs: actor 2 + reference 2 + vLLM 2 = 6 > 2
    with pytest.raises(ConfigError, match="needs 6 GPUs but openrlhf.num_nodes x openrlhf.gpus_per_node is 1 x 2 = 2"):
        placement(toy, small_orl(colocate_all_models=False))
    with pytest.raises(ConfigError, match="train.global_batch' \\(8\\) must be a multiple of .* \\(6\\)"):
        placement(toy, small_orl(gpus_per_node=3, actor_num_gpus_per_node=3, ref_num_gpus_per_node=3,
                                 vllm_num_engines=3, train_micro_batch_size=2))  # 2 x 3 GPUs
    with pytest.raises(ConfigError, match="max_len' \\(1024\\) is below agent.max_context_tokens \\(2048\\)"):
        placement(toy, small_orl(max_len=1024))
    with pytest.raises(ConfigError, match="vllm_gpu_memory_utilization"):
        small_orl(vllm_gpu_memory_utilization=1.5)


def test_command_agrees_with_prepare_run(toy, tmp_path):
    argv = openrlhf_command(toy, tmp_path / "run", tmp_path / "m", "c.jsonl", small_orl())
    prepared = prepare_run(toy, tmp_path / "run", tmp_path / "m", "c.jsonl", engines=2)
    groups = dict(flag_groups(argv))
    assert groups["--rollout.batch_size"] == [str(prepared["rollout_batch_size"])]
    assert groups["--rollout.n_samples_per_prompt"] == [str(prepared["n_samples_per_prompt"])]
    assert groups["--train.agent_func_path"] == [prepared["agent_func_path"]]
    assert groups["--data.prompt_dataset"] == [prepared["prompt_dataset"]]
    lines = Path(prepared["prompt_dataset"]).read_text().splitlines()
    assert len(lines) == toy.selfplay.total_steps * 2  # one pass over the tickets = total_steps rollout batches


def test_relative_paths_as_snakemake_passes_them(toy, tmp_path, monkeypatch):
    """rules/train.smk passes relative --run-dir/--model: the command, the ticket prompts and the run spec must all
    carry the same absolute paths (Ray workers read them from another working directory)."""
    monkeypatch.chdir(tmp_path)
    argv = openrlhf_command(toy, "results/runs/toy", "results/models/m", "results/corpus/games.jsonl", small_orl())
    prepared = prepare_run(toy, "results/runs/toy", "results/models/m", "results/corpus/games.jsonl", engines=2)
    groups = dict(flag_groups(argv))
    run = str(tmp_path / "results" / "runs" / "toy")
    assert groups["--data.prompt_dataset"] == [prepared["prompt_dataset"]] == [run + "/tickets.jsonl"]
    first = json.loads(Path(prepared["prompt_dataset"]).read_text().splitlines()[0])
    assert json.loads(first["prompt"]) == {"spade_run": run}
    spec = json.loads(Path(prepared["run_spec"]).read_text())
    assert (spec["model_dir"], spec["corpus_path"]) == (str(tmp_path / "results/models/m"),
                                                         str(tmp_path / "results/corpus/games.jsonl"))


def test_presets_cover_every_paper_backbone():
    for path in PAPER_RUNS:
        card = load_config(path).model_card
        preset = load_preset(card)
        assert preset, f"no configs/openrlhf/{card}.yaml"
        orl = from_dict(OpenRLHFConfig, preset, "openrlhf")
        assert orl.enabled and orl.colocate_all_models
    assert not from_dict(OpenRLHFConfig, load_preset("smollm2-135m"), "openrlhf").enabled  # toy stays local
    # the run file's own openrlhf keys win over the preset (what resolve_layers does once the section exists)
    config = load_config(PAPER_RUNS[0])
    assert resolve_openrlhf(config, {"num_nodes": 4}).num_nodes == 4


def test_launch_scripts(tmp_path):
    config = load_config(CONFIG_DIR / "paper" / "spade_games_30b.yaml")
    script = launch_script(config, tmp_path / "run", tmp_path / "m", "c.jsonl")
    argv = openrlhf_command(config, tmp_path / "run", tmp_path / "m", "c.jsonl", python=sys.executable)
    assert shell_command(argv) in script
    assert "scontrol show hostnames" in script and '"${STEP[@]}" -w "$node"' in script  # run: test_rlhf_launch_script
    assert "GPUS_WANTED=16" in script
    remote = resolve_openrlhf(config, {"ray_address": "http://head:8265", "wandb_project": "spade"})
    submitted = launch_script(config, tmp_path / "run", tmp_path / "m", "c.jsonl", remote)
    assert "job submit --address \"$ADDRESS\"" in submitted and "srun" not in submitted
    assert '"${WANDB_API_KEY:?set WANDB_API_KEY for wandb logging}"' in submitted  # expanded at run time only
    for text in (script, submitted):
        (tmp_path / "s.sh").write_text(text)
        assert subprocess.run(["bash", "-n", str(tmp_path / "s.sh")]).returncode == 0


def test_ray_temp_dir_keeps_its_socket_paths_under_the_unix_limit(tmp_path):
    """Ray puts its plasma socket at <temp dir>/session_<date>_<time>_<us>_<pid>/sockets/plasma_store and rejects paths
    over 107 bytes: the launch script falls back from a long $TMPDIR to /tmp (run here in bash, as on a node)."""
    script = launch_script(load_config(CONFIG_DIR / "paper" / "spade_games_4b.yaml"), tmp_path / "run", tmp_path / "m",
                           "c.jsonl")
    lines = [line for line in script.splitlines() if line.lstrip().startswith(("TMP_RAY=", "if [ \"${#TMP_RAY}\""))]
    assert len(lines) == 2
    socket = "/session_2026-12-02_06-50-40_123456_4194304/sockets/plasma_store"
    for tmpdir, expected in (("/tmp", "/tmp/ray_12345678"),
                             ("/scratch/slurm/job_12345678/node-local-tmp", "/tmp/ray_12345678")):
        out = subprocess.run(["bash", "-c", "\n".join(lines) + '\necho "$TMP_RAY"'], capture_output=True, text=True,
                             env={"TMPDIR": tmpdir, "SLURM_JOB_ID": "12345678", "PATH": "/usr/bin:/bin"})
        assert out.stdout.strip() == expected and len(expected + socket) <= 107, tmpdir
    short = subprocess.run(["bash", "-c", "\n".join(lines) + '\necho "$TMP_RAY"'], capture_output=True, text=True,
                           env={"TMPDIR": "/lscratch", "SLURM_JOB_ID": "7", "PATH": "/usr/bin:/bin"})
    assert short.stdout.strip() == "/lscratch/ray_7"  # a short $TMPDIR is kept


def test_link_checkpoints(toy, tmp_path):
    ckpt = run_paths(tmp_path)["ckpt"]
    for step in toy.selfplay.checkpoint_steps():  # [2, 4]
        (ckpt / f"global_step{step}_hf").mkdir(parents=True)
        (ckpt / f"global_step{step}_hf" / "config.json").write_text("{}")
    assert link_checkpoints(toy, tmp_path) == ["step_000002", "step_000004"]
    assert (tmp_path / "checkpoints" / "step_000004" / "config.json").is_file()
    (ckpt / "global_step4_hf" / "config.json").unlink()
    with pytest.raises(LaunchError, match="global_step4_hf"):
        link_checkpoints(toy, tmp_path)


def test_cli_dry_run_prints_and_writes_nothing(tmp_path, capsys):
    run = tmp_path / "runs" / "spade_games_8b"
    rc = main(["train", "--config", str(CONFIG_DIR / "paper" / "spade_games_8b.yaml"), "--backend", "openrlhf",
               "--dry-run", "--model", str(tmp_path / "m"), "--corpus", "c.jsonl", "--run-dir", str(run)])
    out = capsys.readouterr().out
    assert rc == 0 and not run.exists() and list(tmp_path.iterdir()) == []
    assert "reference          1 node(s) x 8 GPUs (colocated with the actor)" in out
    assert "--algo.kl.init_coef 0.005" in out and "--data.max_len 36384" in out
    assert "parser check: every flag exists" in out


@pytest.mark.skipif(not missing_gpu_modules(), reason="the GPU stack is installed here")
def test_cli_without_gpu_stack_says_what_to_install(tmp_path, capsys):
    rc = main(["train", "--config", str(CONFIG_DIR / "paper" / "spade_games_4b.yaml"), "--model", str(tmp_path / "m"),
               "--corpus", "c.jsonl", "--run-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert rc == 2 and "GPU training environment" in err and "vllm==0.29.0" in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()


def test_openrlhf_refuses_tis_on_delayed_samples_only(tmp_path):
    """train.tis_samples 'delayed' has no OpenRLHF form (its correction weighs every sample): refused, naming the key."""
    config = load_config(CONFIG_DIR / "paper" / "spade_games_4b.yaml", overrides={"train": {"tis_samples": "delayed"}})
    with pytest.raises(ConfigError, match=r"train\.tis_samples.*'delayed'.*allowed with --backend openrlhf: 'all'"):
        openrlhf_command(config, tmp_path / "run", tmp_path / "m", "c.jsonl")


def test_openrlhf_refuses_frozen_weights(tmp_path):
    """train.frozen (the mechanism runs' local-trainer switch) has no OpenRLHF form: refused, naming the key."""
    config = load_config(CONFIG_DIR / "paper" / "spade_games_4b.yaml", overrides={"train": {"frozen": ["embeddings"]}})
    with pytest.raises(ConfigError, match=r"train\.frozen.*\['embeddings'\].*allowed with --backend openrlhf: \[\]"):
        openrlhf_command(config, tmp_path / "run", tmp_path / "m", "c.jsonl")


def test_local_backend_rejects_dry_run(tmp_path, capsys):
    rc = main(["train", "--backend", "local", "--dry-run", "--model", str(tmp_path), "--run-dir", str(tmp_path / "r")])
    assert rc == 2 and "--backend openrlhf" in capsys.readouterr().err


# the reference's setting of each fidelity switch (docs/FIDELITY.md), by flavour where the reference scripts differ
REFERENCE_SWITCHES = {
    "agent.top_p": 0.95, "agent.top_k": 20, "designer.top_p": 0.95, "designer.top_k": 20, "designer.hint_top_p": 0.9,
    "train.logprob_temperature": 1.0, "train.loss_aggregation": "seq_mean_token_mean",
    "train.designer_upweight_count": "returned", "agent.cut_turns": "end", "agent.turn_limit": "own",
    "agent.turn_samples": "episode", "validation.screen_unclear": "pass", "agent.tool_format": "native",
    "eval.bfcl_multi_turn.tool_format": "native", "eval.tau2.tool_format": "native", "validation.reset_gate": "lenient",
    "memory.examples": "reference", "selfplay.top_up": "window", "agent.tool_call_syntax": "xml_json",
    "train.tis_samples": "all", "train.rollout_logprobs": "reference",
    "agent.enable_thinking": None, "designer.enable_thinking": None,
    "designer.reward": "regret", "selfplay.total_steps": 400, "eval.livecodebench.problems": "release_v6",
    "eval.tau2.evaluation_type": "all_with_nl_assertions", "eval.tau2.user_model": "gpt-4.1",
    "eval.tau2.user_max_tokens": 2048, "designer.hint_timeout_s": 120.0,
}
BY_FLAVOUR = {"interactive": {"agent.truncated_episodes": "train", "validation.llm_screen": False,
                              "validation.screen_timeout_s": 0.0},
              "tool_use": {"agent.truncated_episodes": "mask", "validation.llm_screen": True,
                           "validation.screen_timeout_s": 120.0}}
# by run where the reference scripts differ per backbone or run (issue 40): Qwen3-8B thinks as the agent only
# (the RLVE script renders every call with thinking on and runs no designer)
ONLY_AGENT_THINKS = {"agent.enable_thinking": True, "designer.enable_thinking": False}
BY_RUN = {"spade_games_8b": ONLY_AGENT_THINKS, "spade_tool_use_8b": ONLY_AGENT_THINKS,
          "fixed_env_grpo_8b": ONLY_AGENT_THINKS, "fixed_env_rlve_8b": {"agent.enable_thinking": True},
          # the tool-use 4B script: regret_based reward, 500 rollouts, log-prob temperature 0.7
          "spade_tool_use_4b": {"designer.reward": "regret_window", "selfplay.total_steps": 500,
                                "train.logprob_temperature": 0.7},
          # ablation and comparison runs whose designer reward is their subject
          "ablation_ema_lp_30b": {"designer.reward": "ema_lp"}, "comparison_calibration_30b": {"designer.reward": "calibration"}}


def test_every_paper_run_shows_the_reference_fidelity_switches_in_its_dry_run(paper):
    from spade.config import FIDELITY_KEYS, describe_fidelity

    runs, _ = paper
    for name, config, _ in runs:
        expected = {**REFERENCE_SWITCHES, **BY_FLAVOUR[config.selfplay.flavour], **BY_RUN.get(name, {})}
        assert sorted(expected) == sorted(FIDELITY_KEYS)
        shown = dict(line.strip().split(" = ") for line in describe_fidelity(config)[1:])
        assert shown == {k: "null" if v is None else str(v) for k, v in expected.items()}, name
    text = dry_run(runs[0][1], "/scratch/run", "/scratch/model", "/scratch/corpus.jsonl")
    assert "# fidelity switches (docs/FIDELITY.md):\n#   agent.top_p = 0.95\n" in text
