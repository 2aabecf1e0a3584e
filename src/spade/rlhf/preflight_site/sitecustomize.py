"""Started by Python in every process of a preflight run (``spade.rlhf.preflight``; this folder is on its PYTHONPATH
only): installs the probes' records (``spade.rlhf.cpu.probes.GPU_PATCHES``), and no CUDA stand-in."""

from spade.rlhf.cpu.patches import install
from spade.rlhf.cpu.probes import GPU_PATCHES

install(GPU_PATCHES)
