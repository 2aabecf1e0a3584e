"""The launch script ``spade.rlhf.script.launch_script`` writes, run by bash as a SLURM job would run it.

There is no SLURM cluster, GPU or Apptainer here, so the commands the script calls on the host (``srun``,
``scontrol``, ``apptainer``, ``hostname``, ``ip``) and the ones it starts in the image (``ray``, ``python``) are small
executables on ``PATH`` that log their arguments and environment and then do what the real ones do to the control
flow: ``srun`` and ``apptainer exec`` run their payload, ``ray start --block`` blocks, ``python -c`` answers the
cluster's GPU count. What is under test is the script's own logic: which command runs where, on which node,
with which binding and environment.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import stat
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

import spade
from spade.config import CONFIG_DIR, load_config
from spade.inference import vllm_logprobs
from spade.rlhf.command import ENTRY_POINT, LaunchError, openrlhf_command, shell_command
from spade.rlhf.config import OpenRLHFConfig, resolve_openrlhf
from spade.rlhf.launch import launch, missing_gpu_modules
from spade.rlhf.script import launch_script

SRC = Path(spade.__file__).resolve().parents[1]  # our code: first on the image's path, its repository bound

# Each fake appends one JSON line {"tool", "argv", "node", env...} to $FAKE_LOG.
LOGGER = r'''
log() {
  python3 - "$@" <<'PY'
import json, os, sys
keys = ("RAY_ADDRESS", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_IB_HCA", "FAKE_NODE", "IN_IMAGE_OF",
        "SPADE_ROLLOUT_LOGPROBS", "PYTHONPATH")
entry = {"tool": os.environ["FAKE_TOOL"], "argv": sys.argv[1:], **{k: os.environ.get(k) for k in keys}}
with open(os.environ["FAKE_LOG"], "a") as f:
    f.write(json.dumps(entry) + "\n")
PY
}
'''

FAKES = {
    # srun [options] command...: run the command "on" the node of -w
    "srun": r'''
FAKE_TOOL=srun log "$@"
while [ $# -gt 0 ]; do
  case "$1" in
    -w) export FAKE_NODE="$2"; shift 2 ;;
    -*) shift ;;
    *) break ;;
  esac
done
exec "$@"
''',
    "scontrol": r'''
FAKE_TOOL=scontrol log "$@"
[ "$1 $2" = "show hostnames" ] || exit 1
printf '%s\n' $FAKE_NODES
''',
    # squeue -h -j JOB -o "%N %C %D": the allocation's node list, CPUs in all and node count, as the controller has it
    "squeue": r'''
FAKE_TOOL=squeue log "$@"
echo "$FAKE_SQUEUE"
''',
    # apptainer exec [options] IMAGE command...: run the command "inside" the image
    "apptainer": r'''
FAKE_TOOL=apptainer log "$@"
[ "$1" = exec ] || exit 1
shift
while [ $# -gt 0 ]; do
  case "$1" in
    --bind|--env) shift 2 ;;
    -*) shift ;;
    *) break ;;
  esac
done
[ -d "$(dirname "$1")" ] || { echo "apptainer: image folder of $1 missing" >&2; exit 1; }
export IN_IMAGE_OF="$1"
shift
exec "$@"
''',
    "hostname": r'''
case "$1" in
  -I) echo "127.0.1.1 ${FAKE_IP_PREFIX}.${FAKE_NODE_INDEX:-1} fe80::1" ;;
  -s|"") echo "${FAKE_NODE:-gpu01}" ;;
  *) exit 1 ;;
esac
''',
    "ip": r'''
echo "4: ib0    inet ${FAKE_IB_PREFIX}.1/16 brd 10.9.255.255 scope global ib0"
''',
    # inside the image
    # `ray start` joins the fake cluster only after its call is logged: the cluster's GPUs are those of the nodes
    # whose start is logged ($FAKE_LOG.cluster, one line of --num-gpus per node), so the script's wait for every GPU
    # is also a wait for every node's log line (a fixed answer let the script exit before a worker had logged)
    "ray": r'''
case " $* " in *" --address="*) /bin/sleep "${FAKE_WORKER_DELAY:-0}" ;; esac  # a worker node that starts late
FAKE_TOOL=ray log "$@"
if [ "$1" = start ]; then
  gpus=0; previous=
  for arg in "$@"; do [ "$previous" = --num-gpus ] && gpus=$arg; previous=$arg; done
  echo "$gpus" >> "$FAKE_LOG.cluster"
  exec /bin/sleep 30
fi
[ "$1 $2" = "job status" ] && echo "Status for job: SUCCEEDED"
exit 0
''',
    "python": r'''
FAKE_TOOL=python log "$@"
case "$2" in
  *cluster_resources*) if [ -f "$FAKE_LOG.cluster" ]; then awk '{n += $1} END {print n}' "$FAKE_LOG.cluster"; else echo -1; fi ;;
  *infiniband*) echo "$FAKE_IB" ;;
esac
exit 0
''',
    # the script's poll interval while Ray starts (5 s), shortened
    "sleep": r'''
exec /bin/sleep 0.1
''',
}


def fake_bin(folder: Path) -> Path:
    folder.mkdir()
    for name, body in FAKES.items():
        path = folder / name
        path.write_text("#!/usr/bin/env bash\nset -eu\n" + LOGGER + body)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return folder


def run_script(tmp_path, config, env: dict, image: str = "containers/spade-gpu.sif", apptainer_args: str = "--nv"):
    """Render the script (Ray and python from the image, or without one from the fake bin folder's python) and
    run it with the fakes first on PATH; returns the finished process and the logged calls."""
    (tmp_path / "containers").mkdir(exist_ok=True)
    bin_dir = tmp_path / "bin"
    script = tmp_path / "launch.sh"
    script.write_text(launch_script(config, tmp_path / "run", tmp_path / "model", tmp_path / "corpus.jsonl",
                                    python=str(bin_dir / "python"), image=str(tmp_path / image) if image else "",
                                    apptainer_args=apptainer_args))
    if not bin_dir.exists():
        fake_bin(bin_dir)
    log = tmp_path / "calls.jsonl"
    base = {"PATH": f"{bin_dir}:/usr/bin:/bin", "FAKE_LOG": str(log), "TMPDIR": str(tmp_path / "tmp"),
            "FAKE_IP_PREFIX": "10.1.2", "FAKE_IB_PREFIX": "10.9.0", "FAKE_IB": "mlx5_0",
            "HOME": str(tmp_path)}
    done = subprocess.run(["bash", str(script)], env={**base, **env}, capture_output=True, text=True, timeout=120)
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return done, calls


# the environment of the rule's job step, as the executor plugin's `srun -n1` gives it (seen on a real SLURM 22.05 with
# two nodes): SLURM_JOB_NODELIST names the step's one node, SLURMD_NODENAME and SLURM_JOB_CPUS_PER_NODE are unset;
# the allocation's nodes and CPUs come from the controller (squeue)
SLURM_2 = {"SLURM_JOB_ID": "4242", "SLURM_JOB_NODELIST": "gpu01", "SLURM_STEP_NODELIST": "gpu01",
           "SLURM_NODELIST": "gpu[01-02]", "FAKE_SQUEUE": "gpu[01-02] 128 2", "FAKE_NODES": "gpu01 gpu02"}


@pytest.fixture(scope="module")
def config_30b():
    return load_config(CONFIG_DIR / "paper" / "spade_games_30b.yaml")  # 2 nodes x 8 GPUs


def test_two_node_launch_runs_srun_on_the_host_and_every_ray_process_in_the_image(tmp_path, config_30b):
    done, calls = run_script(tmp_path, config_30b, SLURM_2)
    assert done.returncode == 0, done.stderr
    sruns = [c for c in calls if c["tool"] == "srun"]
    starts = [c for c in calls if c["tool"] == "ray"]
    drivers = [c for c in calls if c["tool"] == "python" and c["argv"][:2] == ["-m", ENTRY_POINT]]
    # one srun step per Ray node, each bound to the node's 8 GPUs, its 64 CPUs and all its memory
    assert [c["argv"][c["argv"].index("-w") + 1] for c in sruns] == ["gpu01", "gpu02"]
    for call in sruns:
        assert {"--overlap", "--nodes=1", "--ntasks=1", "--cpus-per-task=64", "--gres=gpu:8", "--mem=0"} <= set(call["argv"])
    # srun and scontrol run on the host; ray and python only inside the image, entered with apptainer exec --nv
    image = str(tmp_path / "containers" / "spade-gpu.sif")
    assert all(c["IN_IMAGE_OF"] is None for c in calls if c["tool"] in ("srun", "scontrol", "apptainer"))
    assert all(c["IN_IMAGE_OF"] == image for c in calls if c["tool"] in ("ray", "python"))
    for call in (c for c in calls if c["tool"] == "apptainer"):
        argv = call["argv"]
        assert argv[:2] == ["exec", "--nv"] and argv[argv.index(image) + 1] in ("ray", "python")
        binds = ",".join(argv[i + 1] for i, a in enumerate(argv) if a == "--bind").split(",")
        assert str(tmp_path) in binds and str(SRC.parent) in binds
        # our code first, the engine site folder (weight sync, rollout log-probs) last
        assert f"PYTHONPATH={SRC}{os.pathsep}{vllm_logprobs.SITE}" in argv
    assert all(c["SPADE_ROLLOUT_LOGPROBS"] == "reference" for c in calls if c["tool"] in ("ray", "python"))
    # the head on this node at its first non-loopback IPv4 address, the worker on the other node joins it
    head, worker = sorted(starts, key=lambda c: "--head" not in c["argv"])
    assert head["FAKE_NODE"] == "gpu01" and "--node-ip-address=10.1.2.1" in head["argv"]
    port = 20000 + 4242 % 20000
    assert worker["FAKE_NODE"] == "gpu02" and f"--address=10.1.2.1:{port}" in worker["argv"]
    assert {"--block", "--num-gpus", "8"} <= set(head["argv"]) and "--head" not in worker["argv"]
    # the driver runs once, here (not in an srun step), and finds the cluster through RAY_ADDRESS
    assert len(drivers) == 1 and drivers[0]["FAKE_NODE"] is None and drivers[0]["RAY_ADDRESS"] == f"10.1.2.1:{port}"
    assert shell_command(openrlhf_command(config_30b, tmp_path / "run", tmp_path / "model",
                                          tmp_path / "corpus.jsonl", python="python")).split()[1:] \
        == [shlex.quote(a) for a in drivers[0]["argv"]]
    assert "InfiniBand" not in done.stderr  # the image sees an IB device


def test_network_interface_and_env_reach_every_ray_process(tmp_path, config_30b):
    orl = resolve_openrlhf(config_30b, {"network_interface": "ib0", "env": {"NCCL_IB_HCA": "mlx5"}})
    config = replace(config_30b, openrlhf=orl)
    done, calls = run_script(tmp_path, config, {**SLURM_2, "FAKE_IB": ""})
    assert done.returncode == 0, done.stderr
    ray_and_driver = [c for c in calls if c["tool"] in ("ray", "python") and c["argv"][:1] != ["-c"]]
    assert len(ray_and_driver) == 3
    for call in ray_and_driver:
        assert (call["NCCL_SOCKET_IFNAME"], call["GLOO_SOCKET_IFNAME"], call["NCCL_IB_HCA"]) == ("ib0", "ib0", "mlx5")
    head = next(c for c in calls if c["tool"] == "ray" and "--head" in c["argv"])
    assert "--node-ip-address=10.9.0.1" in head["argv"]  # the address of ib0, not of `hostname -I`
    assert "NCCL between the nodes will use TCP sockets" in done.stderr  # no IB device seen in the image


def test_the_driver_waits_for_a_worker_node_that_starts_late(tmp_path, config_30b):
    """The driver starts only once every node's GPUs have joined the cluster, however late a worker's Ray starts."""
    done, calls = run_script(tmp_path, config_30b, {**SLURM_2, "FAKE_WORKER_DELAY": "2"})
    assert done.returncode == 0, done.stderr
    tools = [(c["tool"], "--head" in c["argv"]) for c in calls if c["tool"] == "ray"
             or (c["tool"] == "python" and c["argv"][:2] == ["-m", ENTRY_POINT])]
    assert tools == [("ray", True), ("ray", False), ("python", False)]


def test_two_node_launch_refuses_a_smaller_allocation_and_no_slurm(tmp_path, config_30b):
    done, calls = run_script(tmp_path, config_30b, {**SLURM_2, "FAKE_SQUEUE": "gpu01 64 1", "FAKE_NODES": "gpu01"})
    assert done.returncode == 2 and "the allocation has 1 node(s) (gpu01), openrlhf.num_nodes wants 2" in done.stderr
    assert not [c for c in calls if c["tool"] in ("ray", "python")]
    for log in ("calls.jsonl", "calls.jsonl.cluster"):
        (tmp_path / log).unlink(missing_ok=True)
    shutil.rmtree(tmp_path / "bin")
    done, calls = run_script(tmp_path, config_30b, {})
    assert done.returncode == 2 and "inside a SLURM allocation" in done.stderr and not calls


def test_single_node_without_slurm_or_image_starts_ray_directly(tmp_path):
    config = load_config(CONFIG_DIR / "paper" / "spade_games_4b.yaml")  # 1 node x 8 GPUs
    done, calls = run_script(tmp_path, config, {}, image="")
    assert done.returncode == 0, done.stderr
    assert "APPTAINER=" not in (tmp_path / "launch.sh").read_text()
    assert [c["tool"] for c in calls if c["tool"] != "python" or c["argv"][0] != "-c"] == ["ray", "python"]
    head = next(c for c in calls if c["tool"] == "ray")
    assert "--head" in head["argv"] and head["FAKE_NODE"] is None and head["IN_IMAGE_OF"] is None
    for call in calls:  # Ray's processes and the driver inherit the engine site folder and the rollout log-prob mode
        assert call["PYTHONPATH"] == str(vllm_logprobs.SITE) and call["SPADE_ROLLOUT_LOGPROBS"] == "reference"


def test_ray_job_submit_carries_the_run_environment(tmp_path):
    """With openrlhf.ray_address the job runs on a cluster that never sees this script's exports: openrlhf.env, the
    rollout log-prob mode and the engine site folder (after the cluster's own PYTHONPATH) go in the job's runtime env."""
    config = load_config(CONFIG_DIR / "paper" / "spade_games_4b.yaml")
    orl = resolve_openrlhf(config, {"ray_address": "http://head:8265", "env": {"NCCL_IB_HCA": "mlx5"}})
    processed = replace(config, openrlhf=orl, train=replace(config.train, rollout_logprobs="processed"))
    for run_config, mode in ((replace(config, openrlhf=orl), "reference"), (processed, "processed")):
        done, calls = run_script(tmp_path, run_config, {}, image="")
        assert done.returncode == 0, done.stderr
        (submit,) = [c for c in calls if c["tool"] == "ray" and c["argv"][:2] == ["job", "submit"]]
        argv = submit["argv"]
        env_vars = json.loads(argv[argv.index("--runtime-env-json") + 1])["env_vars"]
        assert env_vars == {"NCCL_IB_HCA": "mlx5", "SPADE_ROLLOUT_LOGPROBS": mode,
                            "PYTHONPATH": f"${{PYTHONPATH}}{os.pathsep}{vllm_logprobs.SITE}"}
        (tmp_path / "calls.jsonl").unlink()


def test_single_node_in_slurm_binds_the_head_to_the_gpus(tmp_path):
    config = load_config(CONFIG_DIR / "paper" / "spade_games_4b.yaml")
    env = {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "gpu07", "SLURMD_NODENAME": "gpu07",
           "SLURM_JOB_CPUS_PER_NODE": "96", "FAKE_SQUEUE": "gpu07 96 1", "FAKE_NODES": "gpu07"}
    done, calls = run_script(tmp_path, config, env)
    assert done.returncode == 0, done.stderr
    (srun,) = [c for c in calls if c["tool"] == "srun"]
    assert {"-w", "gpu07", "--gres=gpu:8", "--cpus-per-task=96"} <= set(srun["argv"])
    assert "InfiniBand" not in done.stderr  # one node: NCCL stays inside it


def test_apptainer_args_are_split_like_a_shell(tmp_path, config_30b):
    done, calls = run_script(tmp_path, config_30b, SLURM_2, apptainer_args="--nv --bind /data:/data")
    assert done.returncode == 0, done.stderr
    argv = next(c for c in calls if c["tool"] == "apptainer")["argv"]
    assert argv[:4] == ["exec", "--nv", "--bind", "/data:/data"]


def test_config_rejects_bad_env_and_interface():
    from spade.configtools import ConfigError, from_dict

    with pytest.raises(ConfigError, match="openrlhf.env' has variable name '1X'"):
        from_dict(OpenRLHFConfig, {"env": {"1X": "a"}}, "openrlhf")
    with pytest.raises(ConfigError, match="openrlhf.env.NCCL_DEBUG' has value True"):
        from_dict(OpenRLHFConfig, {"env": {"NCCL_DEBUG": True}}, "openrlhf")
    with pytest.raises(ConfigError, match="openrlhf.network_interface' has value 'ib0; rm'"):
        from_dict(OpenRLHFConfig, {"network_interface": "ib0; rm"}, "openrlhf")


def test_launch_with_an_image_checks_the_gpu_stack_inside_it(tmp_path, config_30b, monkeypatch):
    """`spade train --image`: the GPU modules are looked up by the image's python (through apptainer exec), not
    here; a missing one stops the launch before anything is prepared, naming the image."""
    bin_dir = fake_bin(tmp_path / "bin")
    # this apptainer runs its payload with this machine's interpreter (which lacks vllm) as the image's python
    (bin_dir / "python").write_text(f"#!/usr/bin/env bash\nexec {sys.executable} \"$@\"\n")
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "calls.jsonl"))
    image = tmp_path / "containers" / "spade-gpu.sif"
    image.parent.mkdir()
    image.write_text("not really an image")
    if not missing_gpu_modules():
        pytest.skip("the GPU stack is installed here")
    with pytest.raises(LaunchError, match=r"missing in the image .*spade-gpu.sif: .*vllm"):
        launch(config_30b, tmp_path / "model", None, tmp_path / "run", image=str(image))
    (call,) = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert call["tool"] == "apptainer" and call["argv"][:2] == ["exec", "--nv"] and call["argv"][-3:-1] == ["python", "-c"]
    assert not (tmp_path / "run" / "tickets.jsonl").exists()


def test_launch_with_a_missing_image_says_so(tmp_path, config_30b):
    with pytest.raises(LaunchError, match="no such file"):
        launch(config_30b, tmp_path / "model", None, tmp_path / "run", image=str(tmp_path / "none.sif"))
