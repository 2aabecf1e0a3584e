"""The launch script of an OpenRLHF run: bash text that starts Ray on a SLURM allocation (or a workstation) and
runs the command, or submits it to an existing Ray cluster (``openrlhf.ray_address``); optionally every Ray
process and the driver run inside an Apptainer image (``image_prefix``).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import textwrap
from pathlib import Path

from spade.inference import vllm_logprobs
from spade.rlhf.command import AGENT_FUNC_PATH, OPENRLHF_VERSION, openrlhf_command, shell_command
from spade.rlhf.config import OpenRLHFConfig, resolve_openrlhf
from spade.rlhf.placement import placement

# bytes of "/session_2026-12-02_06-50-40_123456_4194304/sockets/plasma_store" (Ray 2.55's session folder, a 7-digit
# pid) plus a margin of 10: what Ray appends to --temp-dir for its longest socket path
RAY_SOCKET_SUFFIX = 64 + 10


def logger_env(config, run_dir) -> dict:
    """Environment of OpenRLHF's processes for its loggers: with ``logging.wandb``, W&B offline into the run folder
    (``<run_dir>/wandb/offline-run-*``, beside the coordinator's run)."""
    if not config.logging.wandb:
        return {}
    return {"WANDB_MODE": "offline", "WANDB_DIR": os.path.abspath(run_dir)}


def image_binds(run_dir, model_dir, corpus_path) -> list:
    """Host folders the image must see at the same path: the repository (our code and the agent function file),
    the run, the model and the corpus; a folder inside another one listed is left out."""
    folders = [Path(AGENT_FUNC_PATH).resolve().parents[3], Path(run_dir).resolve(), Path(model_dir).resolve()]
    if corpus_path:
        folders.append(Path(corpus_path).resolve().parent)
    kept = []
    for folder in sorted(set(folders), key=lambda f: len(f.parts)):
        if not any(folder.is_relative_to(other) for other in kept):
            kept.append(folder)
    return [str(folder) for folder in kept]


def image_prefix(image: str, apptainer_args: str, binds: list, extra_paths=()) -> list:
    """``apptainer exec`` argv that runs a command inside ``image`` with the repository's code first on the path
    (so the code inside the image is the commit that prepared the run). Folders of this repository on the host's
    PYTHONPATH come first (the preflight's probes, ``spade.rlhf.preflight``); other host folders are left out, since
    their packages are the host's, not the image's. ``extra_paths`` (folders of this repository) come last."""
    src = Path(AGENT_FUNC_PATH).resolve().parents[2]
    repo = src.parent
    ours = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
            if p and Path(p).resolve().is_relative_to(repo) and Path(p).resolve() != src
            and p not in map(str, extra_paths)]
    return ["apptainer", "exec", *shlex.split(apptainer_args), "--bind", ",".join(binds),
            "--env", f"PYTHONPATH={os.pathsep.join([*ours, str(src), *map(str, extra_paths)])}",
            str(Path(image).resolve())]


def launch_script(config, run_dir, model_dir, corpus_path=None, orl: OpenRLHFConfig | None = None,
                  python: str | None = None, image: str = "", apptainer_args: str = "--nv") -> str:
    """Bash text that runs the command: with ``openrlhf.ray_address`` it is sent to that cluster with
    ``ray job submit``; otherwise Ray is started on the allocation and the driver runs here.

    Inside a SLURM allocation every Ray node is one ``srun`` step on its node (the head on this node, one worker
    per further node), each bound explicitly to the node's GPUs, CPUs and memory; outside SLURM (a workstation,
    one node) Ray starts directly. With ``image`` (an Apptainer ``.sif``), ``srun`` and ``scontrol`` run on the
    host and every Ray process and the driver enter the image through ``apptainer exec`` (the usual way clusters
    run containers: the image needs no SLURM client)."""
    orl = orl or resolve_openrlhf(config)
    if image:
        python = "python"
    python = python or sys.executable
    command = shell_command(openrlhf_command(config, run_dir, model_dir, corpus_path, orl, python=python))
    place = placement(config, orl)
    # every process of the run: the rollout log-prob mode, and the engine site folder (the weight sync through vLLM's
    # layerwise reload, the rollout log-prob patch) after the caller's PYTHONPATH, where the preflight's or the CPU
    # run's own site folder keeps its place in front of it (spade.inference.vllm_logprobs.engine_environment)
    mode = {vllm_logprobs.MODE_ENV: vllm_logprobs.check_mode(config.train.rollout_logprobs)}
    site = str(vllm_logprobs.SITE)
    if image:
        *apptainer, sif = image_prefix(image, apptainer_args, image_binds(run_dir, model_dir, corpus_path), [site])
        runtime = f"IMAGE={shlex.quote(sif)}\nAPPTAINER=({shlex.join(apptainer)})\n"
        enter = 'IN_IMAGE=("${{APPTAINER[@]}}" {bind}"$IMAGE")\nRAY=("${{IN_IMAGE[@]}}" ray)\nPY=("${{IN_IMAGE[@]}}" python)\n'
        where = f"the Apptainer image {sif} (apptainer exec {apptainer_args})"
    else:
        runtime = (f"RAY=({shlex.quote(str(Path(python).parent / 'ray'))})\n"
                   f"PY=({shlex.quote(python)})\n")
        enter = ""
        where = f"the Python environment of {python}"
    exports = "".join(f"export {name}={shlex.quote(str(value))}\n" for name, value in sorted(orl.env.items()))
    exports += ("# the engine site folder: the weight sync through vLLM's layerwise reload and the rollout log-probs of "
                "train.rollout_logprobs (spade.rlhf.weight_sync, spade.inference.vllm_logprobs)\n"
                f"export {vllm_logprobs.MODE_ENV}={shlex.quote(mode[vllm_logprobs.MODE_ENV])}\n"
                f'export PYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}"{shlex.quote(site)}\n')
    loggers = logger_env(config, run_dir)
    if loggers:  # before `ray start`: Ray's workers, OpenRLHF's trainer actor among them, inherit them
        exports += "# logging.wandb: W&B offline, into the run folder\n" + "".join(
            f"export {name}={shlex.quote(value)}\n" for name, value in sorted(loggers.items()))
    head = textwrap.dedent(f"""\
        #!/usr/bin/env bash
        # SPADE run {config.run_name!r} on OpenRLHF {OPENRLHF_VERSION}: written by spade.rlhf.launch; do not edit,
        # change the config (openrlhf.* keys, configs/openrlhf/{config.model_card}.yaml) instead.
        # Placement: {orl.num_nodes} node(s) x {orl.gpus_per_node} GPUs; actor {place['actor']['gpus']} GPUs; \
reference {place['ref']['gpus'] if place['ref'] else 'none (train.kl_coef = 0)'}; vLLM {orl.vllm_num_engines} \
engine(s) x TP {orl.vllm_tensor_parallel_size}; colocate_all {orl.colocate_all_models}.
        # Software: Ray, vLLM, DeepSpeed and OpenRLHF run in {where}.
        set -euo pipefail
        """) + runtime + textwrap.dedent("""\
        export TOKENIZERS_PARALLELISM=false
        # openrlhf.env: NCCL/InfiniBand and other settings, inherited by every Ray process (the job steps and the
        # image get this environment)
        """) + exports
    if orl.ray_address:
        submission = f"spade-{config.run_name}-$(date +%Y%m%d%H%M%S)"
        # the cluster's workers do not see this script's environment: openrlhf.env, the rollout log-prob mode (with
        # the site folder after the cluster's own PYTHONPATH, which Ray expands) and the logger settings go in the
        # job's runtime env
        env_vars = {**orl.env, **mode, **loggers, "PYTHONPATH": "${PYTHONPATH}" + os.pathsep + site}
        runtime_env = f"--runtime-env-json {shlex.quote(json.dumps({'env_vars': env_vars}, sort_keys=True))} "
        body = textwrap.dedent(f"""\
            # An existing Ray cluster: its nodes must see this run folder and have the same Python environment.
            ADDRESS={shlex.quote(orl.ray_address)}
            ID="{submission}"
            "${{RAY[@]}}" job submit --address "$ADDRESS" --submission-id "$ID" {runtime_env}-- {command}
            STATUS=$("${{RAY[@]}}" job status --address "$ADDRESS" "$ID" | tail -n 1)
            echo "$STATUS"
            case "$STATUS" in *SUCCEEDED*) exit 0 ;; *) echo "ray job $ID did not succeed" >&2; exit 1 ;; esac
            """)
        return head + enter.format(bind="") + body
    driver = ('"${IN_IMAGE[@]}" ' if image else "") + command
    start = textwrap.dedent(f"""\
        NODES_WANTED={orl.num_nodes}
        GPUS_PER_NODE={orl.gpus_per_node}
        GPUS_WANTED={orl.num_nodes * orl.gpus_per_node}
        NET_IF={shlex.quote(orl.network_interface)}
        PORT=$((20000 + ${{SLURM_JOB_ID:-$$}} % 20000))
        TMP_RAY="${{TMPDIR:-/tmp}}/ray_${{SLURM_JOB_ID:-$$}}"
        # Ray's sockets live {RAY_SOCKET_SUFFIX} bytes below it ($TMP_RAY/session_<date>_<time>_<us>_<pid>/sockets/
        # plasma_store) and a Unix socket path holds at most 107 bytes: a longer $TMPDIR falls back to /tmp
        if [ "${{#TMP_RAY}}" -gt {107 - RAY_SOCKET_SUFFIX} ]; then TMP_RAY="/tmp/ray_${{SLURM_JOB_ID:-$$}}"; fi
        mkdir -p "$TMP_RAY"
        """) + enter.format(bind='--bind "$TMP_RAY" ') + textwrap.dedent(f"""\
        # this node's address for Ray and NCCL: the IPv4 address of openrlhf.network_interface, or else the first
        # IPv4 address of `hostname -I` that is not a loopback one (the first field of `hostname --ip-address` can
        # be 127.0.1.1 or an IPv6 address)
        node_ip() {{
          if [ -n "$NET_IF" ]; then
            ip -4 -o addr show dev "$NET_IF" | awk '{{split($4, a, "/"); print a[1]; exit}}'
          else
            for address in $(hostname -I); do
              case "$address" in 127.*|*:*) ;; *) echo "$address"; return ;; esac
            done
          fi
        }}
        HEAD_IP=$(node_ip)
        if [ -z "$HEAD_IP" ]; then
          echo "no IPv4 address found on $(hostname) (interface '${{NET_IF:-any}}', config key openrlhf.network_interface)" >&2
          exit 2
        fi
        if [ -n "$NET_IF" ]; then  # NCCL and gloo talk over the same interface as Ray unless the environment says otherwise
          export NCCL_SOCKET_IFNAME="${{NCCL_SOCKET_IFNAME:-$NET_IF}}" GLOO_SOCKET_IFNAME="${{GLOO_SOCKET_IFNAME:-$NET_IF}}"
        fi
        export RAY_ADDRESS="$HEAD_IP:$PORT"
        if [ -n "${{SLURM_JOB_ID:-}}" ]; then
          # one srun step per Ray node, bound to the node's GPUs, CPUs and memory (the job step this script runs in
          # has only what Snakemake's job step asked for); --overlap: steps share the job's resources
          # the allocation's nodes and CPUs from the controller: inside Snakemake's job step (the executor plugin runs
          # the rule with srun) SLURM_JOB_NODELIST is that step's one node and SLURM_JOB_CPUS_PER_NODE and
          # SLURMD_NODENAME are unset (seen on a real SLURM 22.05, scripts/local_slurm.sh --nodes 2)
          read -r JOB_NODES JOB_CPUS JOB_NNODES < <(squeue -h -j "$SLURM_JOB_ID" -o "%N %C %D")
          mapfile -t NODES < <(scontrol show hostnames "$JOB_NODES")
          if [ "${{#NODES[@]}}" -lt "$NODES_WANTED" ]; then
            echo "the allocation has ${{#NODES[@]}} node(s) ($JOB_NODES), openrlhf.num_nodes wants $NODES_WANTED" >&2
            exit 2
          fi
          HERE=${{SLURMD_NODENAME:-${{SLURM_STEP_NODELIST:-$(hostname -s)}}}}  # this step's one node
          CPUS_PER_NODE=$((JOB_CPUS / JOB_NNODES))
          STEP=(srun --overlap --nodes=1 --ntasks=1 --cpus-per-task="$CPUS_PER_NODE" --gres=gpu:"$GPUS_PER_NODE" --mem=0)
          WORKERS=()
          for node in "${{NODES[@]}}"; do if [ "$node" != "$HERE" ]; then WORKERS+=("$node"); fi; done
          WORKERS=("${{WORKERS[@]:0:$((NODES_WANTED - 1))}}")
        elif [ "$NODES_WANTED" -gt 1 ]; then
          echo "openrlhf.num_nodes is $NODES_WANTED: run this script inside a SLURM allocation of that many nodes," \\
               "or set openrlhf.ray_address to an existing Ray cluster" >&2
          exit 2
        fi
        PIDS=()
        cleanup() {{ for pid in "${{PIDS[@]}}"; do kill "$pid" 2>/dev/null || true; done; }}
        trap cleanup EXIT
        RAY_START=(start --block --num-gpus "$GPUS_PER_NODE" --disable-usage-stats)
        HEAD_START=("${{RAY_START[@]}}" --head --node-ip-address="$HEAD_IP" --port="$PORT" --temp-dir="$TMP_RAY" \\
                    --include-dashboard=false)
        # GPUs of the Ray cluster at RAY_ADDRESS (-1 while it does not answer)
        cluster_gpus() {{
          "${{PY[@]}}" -c 'import ray; ray.init(logging_level="ERROR"); print(int(ray.cluster_resources().get("GPU", 0)))' \\
            2>/dev/null || echo -1
        }}
        # wait (up to 10 minutes) until the cluster has at least $1 GPUs
        wait_for_gpus() {{
          HAVE=-1
          for _ in $(seq 120); do
            HAVE=$(cluster_gpus)
            [ "$HAVE" -ge "$1" ] && return 0
            sleep 5
          done
          echo "Ray cluster at $RAY_ADDRESS has $HAVE of $1 GPUs after 10 minutes" >&2
          exit 1
        }}
        if [ -n "${{SLURM_JOB_ID:-}}" ]; then
          "${{STEP[@]}}" -w "$HERE" "${{RAY[@]}}" "${{HEAD_START[@]}}" &
          PIDS+=($!)
          wait_for_gpus 0  # the head answers: the workers can join
          for node in "${{WORKERS[@]}}"; do
            # each worker finds its own address (same interface) and joins the head; Ray's folder is node-local
            "${{STEP[@]}}" -w "$node" bash -c "$(declare -f node_ip); NET_IF=$NET_IF; mkdir -p $(printf %q "$TMP_RAY"); \\
              ip_here=\\$(node_ip); exec $(printf '%q ' "${{RAY[@]}}" "${{RAY_START[@]}}") --address=$RAY_ADDRESS \\
              --node-ip-address=\\$ip_here" &
            PIDS+=($!)
          done
        else
          "${{RAY[@]}}" "${{HEAD_START[@]}}" &
          PIDS+=($!)
        fi
        wait_for_gpus "$GPUS_WANTED"  # every GPU of the allocation has joined
        if [ "$NODES_WANTED" -gt 1 ] && [ -z "$("${{PY[@]}}" -c 'import os; print(*os.listdir("/sys/class/infiniband")) if os.path.isdir("/sys/class/infiniband") else None' 2>/dev/null)" ]; then
          echo "warning: no InfiniBand/RoCE device in /sys/class/infiniband: NCCL between the nodes will use TCP sockets" >&2
        fi
        # the driver runs here and connects to the cluster through RAY_ADDRESS
        {driver}
        """)
    return head + start
