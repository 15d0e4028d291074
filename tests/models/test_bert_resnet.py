"""The big models of chapters 1, 9 and 10: faithful sizes, shapes and clear errors."""

from __future__ import annotations

import pytest
import torch

from helpers.errors import InputError
from helpers.models.bert import BertConfig, bert_base, bert_flops, bert_inputs, parameter_count
from helpers.models.shapes import BERT_BASE
from helpers.models.resnet import image_batch, resnet18, resnet50

BERT_BASE_PARAMS = 109_482_240  # bert-base-uncased: embeddings + 12 layers + pooler


@pytest.fixture(scope="module")
def bert() -> torch.nn.Module:
    return bert_base()


def test_bert_base_parameter_count(bert):
    assert parameter_count(bert) == BERT_BASE_PARAMS


def test_bert_base_configuration(bert):
    cfg = bert.config
    assert (cfg.d_model, cfg.n_layers, cfg.n_heads, cfg.d_ff) == (768, 12, 12, 3072)
    assert (cfg.vocab, cfg.max_positions, cfg.layer_norm_eps) == (30522, 512, 1e-12)
    assert cfg.head_dim == 64 and BERT_BASE.with_() == BERT_BASE and all(
        getattr(cfg, f) == getattr(BERT_BASE, f) for f in BERT_BASE.__dataclass_fields__)
    assert isinstance(bert.layers[0].act, torch.nn.GELU) and bert.layers[0].act.approximate == "none"
    assert not bert.training


def test_bert_shapes_and_mask():
    model = bert_base(seq_len=16, n_layers=2)
    inputs = bert_inputs(3, 16)
    with torch.inference_mode():
        seq, pooled = model(**inputs)
        assert seq.shape == (3, 16, 768) and pooled.shape == (3, 768)
        assert pooled.abs().max() <= 1.0  # tanh pooler
        # Padding must not change the unpadded tokens' outputs.
        padded = {k: torch.cat([v, v[:, :4]], 1) for k, v in inputs.items()}
        padded["attention_mask"][:, 16:] = 0
        seq_p, _ = model(**padded)
        torch.testing.assert_close(seq_p[:, :16], seq, rtol=1e-4, atol=1e-4)


def test_bert_sdpa_matches_explicit_attention():
    fast = bert_base(seq_len=8, n_layers=2)
    slow = bert_base(seq_len=8, n_layers=2, attention="math")
    slow.load_state_dict(fast.state_dict())
    inputs = bert_inputs(2, 8)
    with torch.inference_mode():
        torch.testing.assert_close(fast(**inputs)[0], slow(**inputs)[0], rtol=1e-4, atol=1e-4)


def test_bert_classifier_head():
    model = bert_base(seq_len=8, n_layers=1, num_labels=3)
    with torch.inference_mode():
        assert model(**bert_inputs(2, 8)).shape == (2, 3)


def test_bert_flops_of_base_seq128():
    # 12 layers x (4 h^2 + 2 h ffn) x 2 per MAC x 128 tokens ≈ 21.7 GFLOP, plus attention ≈ 22.4 GFLOP
    assert 21e9 < bert_flops(1, 128) < 23e9
    assert bert_flops(4, 128) > 3.9 * bert_flops(1, 128)


@pytest.mark.parametrize("kwargs", [dict(seq_len=0), dict(seq_len=513), dict(attention="flash"),
                                    dict(hidden_size=1024), dict(num_layers=2), dict(n_heads=5)])
def test_bert_rejects_bad_settings(kwargs):
    with pytest.raises(InputError, match="seq_len|attention|unknown BertConfig field|divisible by n_heads=5"):
        bert_base(**kwargs)


def test_bert_inputs_are_valid_and_repeatable():
    a, b = bert_inputs(2, 128), bert_inputs(2, 128)
    assert torch.equal(a["input_ids"], b["input_ids"])
    assert a["input_ids"].max() < BertConfig().vocab and a["attention_mask"].all()
    with pytest.raises(InputError):
        bert_inputs(0, 128)


def test_resnet50_parameter_count_matches_torchvision():
    assert parameter_count(resnet50()) == 25_557_032
    assert parameter_count(resnet18()) == 11_689_512
    assert parameter_count(resnet50(num_classes=10)) == 25_557_032 - 2048 * 990 - 990


def test_resnet50_is_v1_5_and_shapes():
    model = resnet50(num_classes=10)
    first = model.layer2[0]
    assert first.conv1.stride == (1, 1) and first.conv2.stride == (2, 2)  # stride on the 3x3
    assert "layer4.2.bn3.running_var" in model.state_dict()  # torchvision's names
    with torch.inference_mode():
        assert model(image_batch(2, 64)).shape == (2, 10)


def test_resnet_rejects_bad_input():
    with pytest.raises(InputError):
        resnet50(num_classes=0)
    with pytest.raises(InputError):
        image_batch(1, size=8)
