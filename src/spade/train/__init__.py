"""The local training backend and what measures or logs training.

``trainer`` runs GRPO updates of one Hugging Face model on a CPU or one GPU around the backend-agnostic core
(``spade.core.selfplay``), with checkpoints and exact resume. ``live_metrics`` sends each step's metrics to
TensorBoard / offline W&B (shared with the OpenRLHF backend, ``spade.rlhf``). ``bench_step`` profiles one step
against this machine's matmul peak (``spade bench step``); ``bench_gpu`` checks the local backend on one GPU with
random weights of a real shape (``spade bench gpu``); ``compute`` estimates a run's GPU hours (``spade compute``).
"""
