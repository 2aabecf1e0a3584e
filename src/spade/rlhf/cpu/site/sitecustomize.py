"""Started by Python in every process of the CPU integration run (this folder is on its PYTHONPATH only):
installs the CPU patches of ``spade.rlhf.cpu.patches`` before anything imports torch or OpenRLHF."""

from spade.rlhf.cpu.patches import install

install()
