"""SPADE on OpenRLHF: OpenRLHF generates (vLLM), trains (DeepSpeed) and syncs weights; the SPADE core
decides what is generated and how it is rewarded. Design and settings: docs/OPENRLHF.md.

- ``plan``: tickets (the prompt dataset), designer packs, OpenRLHF response dicts (pure functions);
- ``engine``: vLLM ``RequestOutput`` <-> our ``Generation``; ``EngineBackend`` for the design phase;
- ``coordinator``: the one ``SpadeCoordinator`` of a run (a named Ray actor on GPUs);
- ``executor``: ``SpadeAgentExecutor``, OpenRLHF's ``AgentExecutorBase`` subclass (needs openrlhf);
- ``agent_func``: the thin file for ``--train.agent_func_path``.

``prepare_run`` writes what a launch needs: the run spec and the ticket dataset.
"""

from __future__ import annotations

import os
from pathlib import Path

from spade.rlhf.plan import TicketPlan, ticket_plan, write_tickets

AGENT_FUNC_PATH = Path(__file__).with_name("agent_func.py")


def prepare_run(config, run_dir, model_dir, corpus_path=None, engines: int = 1) -> dict:
    """Write ``<run_dir>/rlhf_run.json`` and ``<run_dir>/tickets.jsonl``; returns the values the launcher
    turns into OpenRLHF flags (see docs/OPENRLHF.md). Every path written is absolute, as in the command
    (``launch.openrlhf_command``): Ray workers read them from another working directory."""
    from spade.rlhf.coordinator import write_run_spec

    run_dir, model_dir = Path(os.path.abspath(run_dir)), os.path.abspath(model_dir)
    corpus_path = os.path.abspath(corpus_path) if corpus_path else None
    plan = ticket_plan(config)
    spec = write_run_spec(run_dir, config, model_dir, corpus_path, engines)
    tickets = Path(run_dir) / "tickets.jsonl"
    write_tickets(tickets, plan, config.selfplay.total_steps, run_dir)
    return {"run_spec": str(spec), "prompt_dataset": str(tickets), "rollout_batch_size": plan.tickets_per_step,
            "n_samples_per_prompt": plan.group_size, "agent_func_path": str(AGENT_FUNC_PATH)}


__all__ = ["AGENT_FUNC_PATH", "TicketPlan", "prepare_run", "ticket_plan", "write_tickets"]
