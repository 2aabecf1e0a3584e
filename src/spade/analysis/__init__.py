"""Analyses behind the paper's figures and quoted numbers (spec section 9, "Analyses").

* :mod:`spade.analysis.diversity` — Vendi score (cosine kernel), SBERT and TF-IDF + LSA embeddings, t-SNE;
* :mod:`spade.analysis.learnability` — learnable share per 16-step window, reward levels, win-rate trends;
* :mod:`spade.analysis.code_stats` — program length, hidden state variables, formula reveal (static);
* :mod:`spade.analysis.rates` — valid-environment rate with a Wilson interval.

Definitions and deviations from the paper: ``docs/ANALYSES.md``. This package only reads what a run wrote
(``results/runs/<run>/envs/set_*.json``, ``metrics.jsonl``); :func:`read_env_sets` loads the archives.
Importing it loads neither torch nor scikit-learn.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from spade.analysis.code_stats import (
    BOOKKEEPING_ATTRIBUTES,
    code_reveals_formula,
    environment_class,
    first_observation_strings,
    first_observation_text,
    formula_reveal_rate,
    formula_spans,
    hidden_state_variables,
    is_physics_text,
    parse_module,
    physics_terms,
    program_length,
    reveals_formula,
)
from spade.analysis.diversity import (
    DrawSummary,
    balanced_draw,
    balanced_quotas,
    cosine_kernel,
    designer_written,
    environment_texts,
    sbert_embeddings,
    tfidf_lsa_embeddings,
    tsne_2d,
    vendi_per_n,
    vendi_score,
    vendi_score_from_kernel,
    windowed_vendi,
)
from spade.analysis.learnability import (
    distinct_reward_levels,
    early_late_gain,
    ema,
    learnable_count,
    learnable_share,
    learnable_share_from_sets,
    phase_mean,
    reward_level_rows,
    set_step,
    slot_win_rates,
    strictly_partial_levels,
    windowed_learnable_share,
)
from spade.analysis.rates import (
    RateEstimate,
    rate_estimate,
    valid_env_rate,
    valid_env_rate_from_sets,
    wilson_interval,
)

_SET_NAME = re.compile(r"^set_(\d+)\.json$")


def read_env_sets(run_dir: str | Path) -> list[dict]:
    """The environment-set archives of a run, ``<run_dir>/envs/set_<step>.json``, in step order.

    Each is the archive as written (``{"environments": [...]}``). A missing ``envs`` folder gives [];
    a file that is not such an archive raises ValueError naming it.
    """
    folder = Path(run_dir) / "envs"
    if not folder.is_dir():
        return []
    found = sorted((int(m.group(1)), p) for p in folder.iterdir() if (m := _SET_NAME.match(p.name)))
    sets = []
    for _, path in found:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path} is not valid JSON: {exc}") from None
        if not isinstance(data, dict) or not isinstance(data.get("environments"), list):
            raise ValueError(f"{path} is not an environment-set archive (no 'environments' list)")
        sets.append(data)
    return sets


__all__ = [
    "BOOKKEEPING_ATTRIBUTES", "DrawSummary", "RateEstimate", "balanced_draw", "balanced_quotas", "code_reveals_formula",
    "cosine_kernel", "designer_written", "distinct_reward_levels", "early_late_gain", "ema", "environment_class", "environment_texts",
    "first_observation_strings", "first_observation_text", "formula_reveal_rate", "formula_spans",
    "hidden_state_variables", "is_physics_text", "learnable_count", "learnable_share", "learnable_share_from_sets",
    "parse_module", "phase_mean", "physics_terms", "program_length", "rate_estimate", "read_env_sets",
    "reveals_formula", "reward_level_rows", "sbert_embeddings", "set_step", "slot_win_rates",
    "strictly_partial_levels", "tfidf_lsa_embeddings", "tsne_2d", "valid_env_rate", "valid_env_rate_from_sets",
    "vendi_per_n", "vendi_score", "vendi_score_from_kernel", "wilson_interval", "windowed_learnable_share",
    "windowed_vendi",
]
