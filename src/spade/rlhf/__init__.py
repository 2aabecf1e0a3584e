"""SPADE on OpenRLHF: OpenRLHF generates (vLLM), trains (DeepSpeed) and syncs weights; the SPADE core
decides what is generated and how it is rewarded. Design and settings: docs/OPENRLHF.md.

The plugin (runs inside OpenRLHF's Ray processes):

- ``plan``: tickets (the prompt dataset), designer packs, OpenRLHF response dicts (pure functions);
- ``engine``: vLLM ``RequestOutput`` <-> our ``Generation``; ``EngineBackend`` for the design phase;
- ``coordinator``: the one ``SpadeCoordinator`` of a run (a named Ray actor on GPUs);
- ``executor``: ``SpadeAgentExecutor``, OpenRLHF's ``AgentExecutorBase`` subclass (needs openrlhf);
- ``agent_func``: the thin file for ``--train.agent_func_path``.

The launcher (runs where ``spade train --backend openrlhf`` starts):

- ``config``: the ``openrlhf`` config section (``OpenRLHFConfig``) and the per-backbone presets;
- ``placement``: GPUs per role, colocation and tensor parallelism, validated before anything starts;
- ``command``: the exact ``train_ppo_ray`` argv, and its check against OpenRLHF's own argument parser;
- ``script``: the bash launch script (Ray on a SLURM allocation or an existing cluster, optionally in an image);
- ``launch``: ``prepare_run`` (run spec and ticket dataset), ``dry_run`` and ``launch`` itself.

``cpu`` holds the CPU integration run of this path (``python -m spade.rlhf.cpu.run``).
"""
