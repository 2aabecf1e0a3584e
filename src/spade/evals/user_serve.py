"""A local user simulator for the benchmarks that play the user with an LLM (ACEBench's multi_turn, tau2-bench).

The paper's evaluations ask a strong model at an endpoint of the user's (``eval.<benchmark>.user_base_url``). Where
there is none (the rehearsal, a toy run on a laptop), ``eval.<benchmark>.user_serve: base_model`` starts our own
OpenAI-compatible server (``spade serve-designer``, ``spade.designer.serve``) over the run's base model for the length
of one evaluation, and points the benchmark's user keys at it. The served model is frozen and the same for every
checkpoint of the run, so checkpoints are compared against one user. It is a stand-in: a small model makes a poor user,
and its scores are no measure of the paper's. A user that calls tools (tau2's telecom domain) gets the server's tool
calls (``tools`` in, ``<tool_call>`` blocks out as ``tool_calls``; spade.designer.serve).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from spade.configtools import ConfigError

USER_SERVE_MODES = ("", "base_model")  # eval.<benchmark>.user_serve
USER_SERVE_TIMEOUT_S = 600.0  # seconds for the server to load its model and answer /v1/models


def user_serve_help(default_url: str) -> str:
    return (f"'' = the user simulator at user_base_url ({default_url}); 'base_model' = a server of ours over the run's "
            "base model, started for each evaluation and stopped after it (spade.evals.user_serve): a stand-in for the "
            "rehearsal and toy runs, whose scores say nothing of the paper's user.")


def base_model_dir(config) -> Path:
    """The run's prepared base model (the folder the workflow's `prepare_model` writes)."""
    from spade.paths import ResultPaths

    return Path(ResultPaths(config.results_dir).model_dir(config.model.name))


@contextmanager
def local_user(config, benchmark: str, log_path: str | Path):
    """Yield the config an evaluation of ``benchmark`` uses: ``config`` itself, or, with ``eval.<benchmark>.user_serve:
    base_model``, a copy whose user keys point at a server of the base model started here (log ``log_path``) and
    stopped on exit."""
    section = getattr(config.eval, benchmark, None)
    mode = getattr(section, "user_serve", "")
    if not mode:
        yield config
        return
    key = f"eval.{benchmark}.user_serve"
    if mode not in USER_SERVE_MODES:
        raise ConfigError(f"config key {key!r} is {mode!r}; allowed: {list(USER_SERVE_MODES)}")
    model_dir = base_model_dir(config)
    if not (model_dir / "config.json").is_file():
        raise ConfigError(f"config key {key!r} is 'base_model', but the run's base model {str(model_dir)!r} is not "
                          "prepared (spade model prepare, or the workflow's prepare_model)")
    from spade.designer.serve import start_server, stop_server
    from spade.seeding import derive_seed

    process, base_url, name = start_server(model_dir, log_path, USER_SERVE_TIMEOUT_S,
                                           derive_seed(config.eval.seed, "user-server", benchmark),
                                           section.user_max_tokens or 1024, key=key)
    served = {"user_base_url": base_url, "user_model": name, "user_api_key_env": ""}
    if hasattr(section, "nl_judge_model"):  # tau2's NL-assertion judge is asked at the user's endpoint
        served["nl_judge_model"] = name
    try:
        yield replace(config, eval=replace(config.eval, **{benchmark: replace(section, **served)}))
    finally:
        stop_server(process)
