"""The local trainer's device and dtype (train.device, train.dtype; issue 31): where the model runs, bf16 with float32
master weights, checkpoints that keep the masters and load on any device."""

from __future__ import annotations

import pytest
import torch

from spade.config import TrainConfig, load_config
from spade.configtools import ConfigError
from spade.core.selfplay import Sample
from spade.inference.models import load_model
from spade.train.trainer import LocalTrainer, train_device, train_dtype, train_run

BF16 = {"model_card": "tiny-random", "train": {"dtype": "bfloat16", "learning_rate": 1e-6, "global_batch": 4,
                                               "micro_batch": 2}}


def test_cuda_without_a_gpu_is_a_config_error_and_auto_follows_torch(monkeypatch, tmp_path):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match=r"'train\.device' is 'cuda', but torch sees no CUDA device"):
        train_device(TrainConfig(device="cuda"))
    assert train_device(TrainConfig(device="auto")) == torch.device("cpu")
    # train_run stops on it before it looks for the model (which does not exist here)
    config = load_config(overrides={"model_card": "tiny-random", "train": {"device": "cuda"}})
    with pytest.raises(ConfigError, match=r"train\.device"):
        train_run(config, tmp_path / "no-model", None, tmp_path / "run")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert train_device(TrainConfig(device="auto")) == torch.device("cuda")
    assert train_device(TrainConfig(device="cpu")) == torch.device("cpu")


def test_a_device_outside_the_choices_names_the_key():
    with pytest.raises(ConfigError, match=r"'train\.device' has value 'gpu'; allowed values"):
        load_config(overrides={"train": {"device": "gpu"}})
    with pytest.raises(ConfigError, match=r"'train\.dtype' has value 'float16'; allowed values"):
        load_config(overrides={"train": {"dtype": "float16"}})


def test_dtype_auto_is_bf16_on_cuda_and_fp32_on_the_cpu():
    assert train_dtype(TrainConfig(), torch.device("cuda")) == torch.bfloat16
    assert train_dtype(TrainConfig(), torch.device("cpu")) == torch.float32
    assert train_dtype(TrainConfig(dtype="float32"), torch.device("cuda")) == torch.float32
    assert train_dtype(TrainConfig(dtype="bfloat16"), torch.device("cpu")) == torch.bfloat16


def _samples() -> list:
    return [Sample("agent", [5 + i, 6, 7, 8 + i, 9], [0, 0, 1, 1, 1], [0.0] * 5, advantage=a)
            for i, a in enumerate((1.0, -1.0, 0.5, -0.5))]


def test_bf16_steps_float32_masters_by_hand_and_rounds_them_into_the_model(tiny_model_dir):
    """AdamW's first step, by hand: w <- w (1 - lr wd) - lr g / (|g| + eps) (m-hat = g, sqrt(v-hat) = |g|), on the
    float32 masters; the bf16 model holds their rounded copies. At lr 1e-6 no weight of magnitude >= 2^-10 moves in
    bf16 itself: stepping the bf16 weights directly (no masters) would lose the update."""
    model, tokenizer = load_model(tiny_model_dir)  # saved in float32
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    config = load_config(overrides=BF16)
    trainer = LocalTrainer(config, model, tokenizer.eos_token_id)
    assert all(p.dtype == torch.bfloat16 for p in model.parameters())
    assert all(b.dtype == torch.float32 for b in model.buffers())  # rotary frequencies are not rounded
    assert all(torch.equal(m, before[n]) for n, m in zip(trainer.names, trainer.masters))  # exact copies
    trainer.update(_samples())
    lr, wd, eps = 1e-6, config.train.weight_decay, 1e-8
    kept_in_bf16 = total = 0
    for name, master, param in zip(trainer.names, trainer.masters, trainer.params):
        g = master.grad  # as clipped and used by the step
        expected = before[name] * (1 - lr * wd) - lr * g / (g.abs() + eps)
        assert torch.allclose(master.detach(), expected, rtol=2e-7, atol=1e-9), name  # float32 rounding
        assert torch.equal(param.detach(), master.detach().to(torch.bfloat16)), name
        # the same step taken on the bf16 weights themselves: a bf16 weight of magnitude >= 2^-10 has neighbours at
        # least 2^-10 x 2^-8 apart; half of that (1.9e-6) exceeds the step (1e-6 plus 1e-7 of the weight), so
        # rounding the stepped weight gives back the old one
        start = before[name].to(torch.bfloat16)
        kept = (start.float() * (1 - lr * wd) - lr * g / (g.abs() + eps)).to(torch.bfloat16) == start
        assert bool(kept[start.abs() >= 2**-10].all()), name
        kept_in_bf16, total = kept_in_bf16 + int(kept.sum()), total + kept.numel()
    assert kept_in_bf16 / total > 0.9  # only weights near zero would have moved in bf16


def test_checkpoints_keep_the_masters_and_load_them_on_any_dtype(tiny_model_dir, tmp_path):
    model, tokenizer = load_model(tiny_model_dir)
    config = load_config(overrides=BF16)
    trainer = LocalTrainer(config, model, tokenizer.eos_token_id)
    trainer.update(_samples())
    trainer.save(tmp_path / "ckpt", tokenizer, {})
    resumed = LocalTrainer(config, load_model(tmp_path / "ckpt")[0], tokenizer.eos_token_id)
    # from the bf16 weights alone the masters would be rounded: the saved ones are needed
    assert not all(torch.equal(a, b) for a, b in zip(trainer.masters, resumed.masters))
    resumed.load_state(tmp_path / "ckpt")
    assert all(torch.equal(a, b) for a, b in zip(trainer.masters, resumed.masters))
    assert all(torch.equal(a, b) for a, b in zip(trainer.params, resumed.params))
    state, loaded = trainer.optimizer.state_dict()["state"], resumed.optimizer.state_dict()["state"]
    assert all(torch.equal(state[i]["exp_avg_sq"], loaded[i]["exp_avg_sq"]) for i in state)
    assert all(loaded[i]["step"].device.type == "cpu" for i in loaded)  # as in a fresh optimizer
    # a float32 trainer (the CPU default) takes the masters as its weights
    fp32 = load_config(overrides={**BF16, "train": {**BF16["train"], "dtype": "float32"}})
    cpu = LocalTrainer(fp32, load_model(tmp_path / "ckpt")[0], tokenizer.eos_token_id)
    assert cpu.masters is None
    cpu.load_state(tmp_path / "ckpt")
    assert all(torch.equal(p, m) for p, m in zip(cpu.params, trainer.masters))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here (torch.cuda.is_available() is False)")
def test_update_and_generation_run_on_cuda(tiny_model_dir):
    from spade.inference.generation import SamplingParams
    from spade.inference.generation_hf import HFBackend

    model, tokenizer = load_model(tiny_model_dir, device="cuda")
    trainer = LocalTrainer(load_config(overrides={"model_card": "tiny-random"}), model, tokenizer.eos_token_id)
    assert next(model.parameters()).dtype == torch.bfloat16 and trainer.masters[0].device.type == "cuda"
    stats = trainer.update(_samples())
    assert stats["optimizer_steps"] == 1 and stats["grad_norm"] > 0
    out = HFBackend(model, tokenizer, device="cuda").generate([[5, 6, 7]], SamplingParams(max_new_tokens=4), seed=0)
    assert len(out[0].completion_ids) >= 1
