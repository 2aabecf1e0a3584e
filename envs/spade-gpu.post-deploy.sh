#!/usr/bin/env bash
# Snakemake runs this inside the freshly created envs/spade-gpu.yaml environment (and only then). It adds what
# pip cannot install in the environment file's single pip call: source-only packages, flash-attn compiled
# against the torch already installed, OpenRLHF without its dependency list, and our package.
# Needs nvcc of CUDA 13.0 (torch 2.13.0's CUDA): load it first, e.g. `module load cuda/13.0`, or set CUDA_HOME.
set -euo pipefail
if ! command -v nvcc >/dev/null 2>&1 && [ -z "${CUDA_HOME:-}" ]; then
  echo "spade-gpu.post-deploy.sh: flash-attn 2.8.3 must be compiled here and needs nvcc (CUDA 13.0): load your" \
       "cluster's CUDA 13.0 module or set CUDA_HOME, remove the half-made environment under .snakemake/conda/ and" \
       "rerun; or use the container instead (docs/CONTAINERS.md)" >&2
  exit 1
fi
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PIP=(python -m pip install --no-cache-dir -c "$ROOT/containers/requirements-gpu.lock")
"${PIP[@]}" --no-deps deepspeed==0.19.6 transformers-stream-generator==0.0.5
FLASH_ATTENTION_FORCE_BUILD=TRUE MAX_JOBS="${MAX_JOBS:-8}" "${PIP[@]}" --no-deps --no-build-isolation flash-attn==2.8.3
"${PIP[@]}" --no-deps openrlhf==0.11.2
# the OpenRLHF wheel also installs a top-level package named `tests`; remove it so it cannot shadow ours
rm -rf "$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/tests"
"${PIP[@]}" --no-deps -e "$ROOT"
python -c "import vllm, deepspeed, flash_attn, openrlhf, ray, spade; print('spade-gpu environment ready: vllm', vllm.__version__)"
