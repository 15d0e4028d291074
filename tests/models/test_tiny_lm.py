"""Chapter 12's tiny LM, its text, its cached training, and the model-level schemes (small random models)."""

from __future__ import annotations

import math

import pytest
import torch

from helpers.errors import InputError
from helpers.model_quant import lm_quant
from helpers.models import lm_train, stdlib_text, tiny_lm
from tests.support.errors import assert_one_line_error

CFG = tiny_lm.LMConfig(d_model=64, n_heads=2, n_layers=2, d_ff=128, ctx=16)


def _model(seed: int = 0) -> tiny_lm.TinyLM:
    torch.manual_seed(seed)
    return tiny_lm.TinyLM(CFG).eval()


def _windows(n: int = 8) -> torch.Tensor:
    return stdlib_text.windows(stdlib_text.load_corpus().heldout, CFG.ctx, n)


def test_corpus_is_deterministic_and_split_by_file():
    c = stdlib_text.load_corpus()
    assert len(c.train) > 100_000 and len(c.heldout) > 20_000 and int(c.train.max()) < 256
    assert not set(stdlib_text.TRAIN_FILES) & set(stdlib_text.HELDOUT_FILES)
    w = stdlib_text.windows(c.heldout, 16, 4)
    assert w.shape == (4, 17) and torch.equal(w[1, 0], c.heldout[16])


def test_the_model_is_causal():
    m, t = _model(), torch.randint(0, 256, (1, 16))
    t2 = t.clone()
    t2[0, 10] = (t[0, 10] + 1) % 256
    with torch.no_grad():
        a, b = m(t), m(t2)
    assert torch.allclose(a[0, :10], b[0, :10], atol=1e-6) and not torch.allclose(a[0, 10:], b[0, 10:])


def test_a_blind_model_has_perplexity_256():
    m = _model()
    torch.nn.init.zeros_(m.head.weight)
    assert tiny_lm.perplexity(m, _windows()) == pytest.approx(256, rel=1e-5)


def test_the_training_cache_reloads_the_same_weights_and_retrains_a_corrupt_file(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBOOK_CACHE", str(tmp_path))
    cfg = lm_train.LMTrainConfig(model=CFG, steps=3, batch=2, warmup=1)
    m1, losses = lm_train.trained_lm(cfg, progress=False)
    m2, losses2 = lm_train.trained_lm(cfg, progress=False)
    assert losses == losses2 and all(torch.equal(a, b) for a, b in zip(m1.state_dict().values(), m2.state_dict().values()))
    lm_train.checkpoint_path(cfg).write_bytes(b"broken")
    m3, _ = lm_train.trained_lm(cfg, progress=False)
    assert all(torch.equal(a, b) for a, b in zip(m1.state_dict().values(), m3.state_dict().values()))
    assert lm_train.config_key(cfg) != lm_train.config_key(lm_train.LMTrainConfig(model=CFG, steps=4, batch=2))


@pytest.mark.parametrize("scheme, tol", [("fp16", 1e-3), ("w8a16", 0.05), ("w8a8", 0.1), ("fp8", 0.2),
                                         ("w4a16", 0.5)])
def test_quantized_models_stay_close_to_fp32(scheme, tol):
    m, t = _model(), _windows(2)[:, :-1]
    q, _ = lm_quant.quantize_lm(m, scheme, **({"group_size": 32} if scheme == "w4a16" else {}))
    with torch.no_grad():
        ref, got = m(t), q(t)
    assert 0 < float((got - ref).abs().mean() / ref.abs().mean()) < tol
    assert isinstance(q.blocks[0].mlp.down, lm_quant.QuantLinear) and not isinstance(m.blocks[0].mlp.down, lm_quant.QuantLinear)


def test_outlier_injection_keeps_the_function_and_creates_the_outlier():
    m, calib = _model(), _windows(4)
    bad = lm_quant.inject_outlier(m, 0, 5, 40.0)
    with torch.no_grad():
        assert torch.allclose(m(calib[:, :-1]), bad(calib[:, :-1]), rtol=1e-4, atol=1e-4)
    before = {r["layer input of"]: r for r in lm_quant.outlier_stats(lm_quant.linear_inputs(m, calib))}
    after = {r["layer input of"]: r for r in lm_quant.outlier_stats(lm_quant.linear_inputs(bad, calib))}
    q = "blocks.0.attn.q"
    assert after[q]["top channel"] == 5 and after[q]["outlier ratio"] > 5 * before[q]["outlier ratio"]


def test_smoothing_schemes_need_calibration_and_awq_returns_alphas():
    m, calib = _model(), _windows(4)
    with pytest.raises(InputError, match="calib"):
        lm_quant.quantize_lm(m, "w8a8", smooth="smoothquant")
    _, alphas = lm_quant.quantize_lm(m, "w4a16", group_size=32, smooth="awq", calib=calib)
    assert len(alphas) == 4 * CFG.n_layers + 1 and all(0 <= a <= 1 for a in alphas.values())
    _, alphas = lm_quant.quantize_lm(m, "w8a8", group_size=32, smooth="awq", calib=calib)  # AWQ uses the groups
    assert len(alphas) == 4 * CFG.n_layers + 1


@pytest.mark.parametrize("scheme, option", [("w8a16", "group_size"), ("w8a8", "group_size"), ("w4a16", "calib")])
def test_options_a_scheme_does_not_use_are_refused(scheme, option):
    m, value = _model(), _windows(2) if option == "calib" else 32
    assert_one_line_error(lambda: lm_quant.quantize_lm(m, scheme, **{option: value}), f"leave {option} out")


def test_kv_cache_hook_changes_attention_only_slightly():
    m, t = _model(), _windows(2)[:, :-1]
    with torch.no_grad():
        ref, int8, int4 = m(t), lm_quant.with_kv_cache(m, "int8")(t), lm_quant.with_kv_cache(m, "int4")(t)
    e8, e4 = (float((y - ref).abs().mean()) for y in (int8, int4))
    assert 0 < e8 < e4 and math.isfinite(e4)
